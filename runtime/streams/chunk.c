/* runtime/streams/chunk.c: trajectory chunks from ring steps (see chunk.h). */
#include "runtime/streams/chunk.h"

#include <stdlib.h>
#include <string.h>

/* A block starts with this header (64 bytes, so columns stay aligned). */
typedef struct block_header {
    atomic_int refs;
    char pad[60];
} block_header;

#define HEADER_BYTES ((uint64_t)sizeof(block_header))
#define QUEUE_CAP_PER_STREAM 3 /* at most 2 chunks finish per step; +1 slack */

typedef struct stream_state {
    void *block; /* the chunk being filled (payload pointer, after the header) */
    int64_t row;
    int64_t valid_rows;
    int64_t newest_version;
} stream_state;

struct gb_chunk_builder {
    gb_chunk_layout layout;
    int streams;
    stream_state *st;
    gb_chunk *queue;
    int qhead, qlen, qcap;
    uint64_t obs_bytes, action_bytes;
    float *carry; /* [streams, S]: the state entering each stream's next row (S > 0) */
    float *overlap_state; /* [streams, S]: the state entering row T - overlap of each stream's
                             chunk, the next chunk's state (overlap > 0 and S > 0) */
    void *stack; /* one observation: a stack rebuilt from stored frames (frame_stack > 1) */
};

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

/* Names, dtypes, shapes, sizes and offsets of the layout's columns, from T, the observation,
 * the action, the state size and the frame stack. */
static int place_columns(gb_chunk_layout *l, gb_error *err)
{
    static const char *const names[GB_CHUNK_STATE + 1] = {
        "obs", "next_obs", "action", "reward", "terminated", "truncated", "valid", "logp",
        "version", "state"};
    const int64_t T = l->T, k = l->frame_stack, *obs_shape = l->obs_shape;
    const int obs_rank = l->obs_rank;
    l->ncols = l->state_size > 0 ? GB_CHUNK_STATE + 1 : GB_CHUNK_STATE;
    l->past_col = k > 1 ? l->ncols++ : -1;
    int64_t shape[GB_WIRE_MAX_RANK];
    uint64_t off = HEADER_BYTES;
    for (int c = 0; c < l->ncols; c++) {
        int rank = 1;
        gb_dtype dt;
        shape[0] = l->T;
        if (c == l->past_col) { /* the k-1 older frames of row 0: [(k-1)*C, ...] */
            dt = l->obs_dtype;
            memcpy(shape, obs_shape, (size_t)obs_rank * sizeof obs_shape[0]);
            shape[0] = obs_shape[0] / k * (k - 1);
            rank = obs_rank;
        } else switch (c) {
        case GB_CHUNK_OBS: /* with a frame stack, each row's newest frame: [T, C, ...] */
            dt = l->obs_dtype;
            memcpy(shape + 1, obs_shape, (size_t)obs_rank * sizeof obs_shape[0]);
            shape[1] = obs_shape[0] / k;
            rank = 1 + obs_rank;
            break;
        case GB_CHUNK_NEXT_OBS:
            dt = l->obs_dtype;
            memcpy(shape, obs_shape, (size_t)obs_rank * sizeof obs_shape[0]);
            rank = obs_rank;
            break;
        case GB_CHUNK_ACTION:
            dt = l->discrete ? GB_DTYPE_INT64 : GB_DTYPE_FLOAT32;
            if (!l->discrete) {
                shape[1] = l->action_dim;
                rank = 2;
            }
            break;
        case GB_CHUNK_REWARD:
        case GB_CHUNK_LOGP:
            dt = GB_DTYPE_FLOAT32;
            break;
        case GB_CHUNK_VERSION:
            dt = GB_DTYPE_INT64;
            break;
        case GB_CHUNK_STATE:
            dt = GB_DTYPE_FLOAT32;
            shape[0] = l->state_size;
            break;
        default:
            dt = GB_DTYPE_UINT8;
            break;
        }
        int rc = gb_wire_set_tensor(&l->desc[c], c == l->past_col ? "obs_past" : names[c], dt,
                                    rank, shape, err);
        if (rc == 0)
            rc = gb_tensor_desc_bytes(&l->desc[c], &l->bytes[c], err);
        if (rc)
            return rc;
        l->offset[c] = off - HEADER_BYTES; /* relative to the payload */
        off = align64(off + l->bytes[c]);
    }
    l->block_bytes = off - HEADER_BYTES;
    l->frame_bytes = l->bytes[GB_CHUNK_OBS] / (uint64_t)T;
    return 0;
}

int gb_chunk_layout_init(gb_chunk_layout *l, int64_t T, gb_dtype obs_dtype, int obs_rank,
                         const int64_t *obs_shape, int discrete, int64_t action_dim,
                         int64_t state_size, gb_error *err)
{
    memset(l, 0, sizeof *l);
    if (T < 1 || obs_rank < 1 || obs_rank > GB_WIRE_MAX_RANK - 1 || gb_dtype_size(obs_dtype) == 0 ||
        (!discrete && action_dim < 1) || state_size < 0)
        return gb_error_set(err, GB_EINVAL, "chunk layout: bad T (%lld), observation, action or "
                            "state size (%lld)", (long long)T, (long long)state_size);
    l->T = T;
    l->obs_dtype = obs_dtype;
    l->obs_rank = obs_rank;
    memcpy(l->obs_shape, obs_shape, (size_t)obs_rank * sizeof obs_shape[0]);
    l->discrete = discrete;
    l->action_dim = discrete ? 1 : action_dim;
    l->state_size = state_size;
    l->frame_stack = 1;
    return place_columns(l, err);
}

int gb_chunk_layout_set_frame_stack(gb_chunk_layout *l, int64_t k, gb_error *err)
{
    if (k < 1 || l->obs_shape[0] % k != 0)
        return gb_error_set(err, GB_EINVAL, "chunk layout: a stack of %lld frames in "
                            "observations of %lld along the first axis", (long long)k,
                            (long long)l->obs_shape[0]);
    l->frame_stack = k;
    return place_columns(l, err);
}

int gb_chunk_layout_set_return_carry(gb_chunk_layout *l, double gamma, gb_error *err)
{
    if (l->state_size < 1)
        return gb_error_set(err, GB_EINVAL, "chunk layout: a return carry needs a state column");
    l->return_carry = 1;
    l->gamma = gamma;
    return 0;
}

int gb_chunk_layout_set_overlap(gb_chunk_layout *l, int64_t overlap, gb_error *err)
{
    if (overlap < 0 || overlap >= l->T)
        return gb_error_set(err, GB_EINVAL, "chunk layout: %lld rows of overlap in chunks of "
                            "%lld (at least one new row a chunk)", (long long)overlap,
                            (long long)l->T);
    l->overlap = overlap;
    return 0;
}

static atomic_int fail_allocs; /* gb_chunk_fail_next_allocs */

void gb_chunk_fail_next_allocs(int n) { atomic_store(&fail_allocs, n); }

static void *block_new(const gb_chunk_layout *l)
{
    void *raw = NULL;
    int f = atomic_load(&fail_allocs);
    while (f > 0 && !atomic_compare_exchange_weak(&fail_allocs, &f, f - 1))
        ;
    if (f > 0)
        return NULL;
    if (posix_memalign(&raw, 64, HEADER_BYTES + l->block_bytes) != 0)
        return NULL;
    atomic_init(&((block_header *)raw)->refs, 1);
    return (char *)raw + HEADER_BYTES;
}

void gb_chunk_release(void *block)
{
    if (!block)
        return;
    block_header *h = (block_header *)((char *)block - HEADER_BYTES);
    if (atomic_fetch_sub(&h->refs, 1) == 1)
        free(h);
}

static void release_frame(void *data, void *hint)
{
    (void)data;
    gb_chunk_release(hint);
}

void gb_chunk_payloads(const gb_chunk_layout *l, const gb_chunk *c,
                       gb_wire_payload payloads[GB_CHUNK_NCOLS])
{
    block_header *h = (block_header *)((char *)c->block - HEADER_BYTES);
    /* The holder's reference becomes the first frame's; each other frame adds one. */
    atomic_fetch_add(&h->refs, l->ncols - 1);
    for (int i = 0; i < l->ncols; i++) {
        payloads[i].data = (char *)c->block + l->offset[i];
        payloads[i].free_fn = release_frame;
        payloads[i].hint = c->block;
        payloads[i].msg = NULL;
    }
}

int gb_chunk_builder_create(const gb_chunk_layout *l, int streams, gb_chunk_builder **out,
                            gb_error *err)
{
    if (streams < 1)
        return gb_error_set(err, GB_EINVAL, "chunk builder: %d streams", streams);
    gb_chunk_builder *b = calloc(1, sizeof *b);
    if (!b)
        return gb_error_set(err, GB_ENOMEM, "chunk builder: out of memory");
    b->layout = *l;
    b->streams = streams;
    b->obs_bytes = l->bytes[GB_CHUNK_NEXT_OBS];
    b->action_bytes = l->bytes[GB_CHUNK_ACTION] / (uint64_t)l->T;
    b->qcap = streams * QUEUE_CAP_PER_STREAM;
    b->st = calloc((size_t)streams, sizeof *b->st);
    b->queue = calloc((size_t)b->qcap, sizeof *b->queue);
    if (!b->st || !b->queue)
        goto nomem;
    size_t states = (size_t)streams * (size_t)l->state_size;
    if (l->state_size > 0 && !(b->carry = calloc(states, sizeof *b->carry)))
        goto nomem;
    if (l->state_size > 0 && l->overlap > 0 &&
        !(b->overlap_state = calloc(states, sizeof *b->overlap_state)))
        goto nomem;
    if (l->frame_stack > 1 && !(b->stack = malloc(b->obs_bytes)))
        goto nomem;
    for (int s = 0; s < streams; s++) {
        b->st[s].block = block_new(l);
        if (!b->st[s].block)
            goto nomem;
        b->st[s].newest_version = -1;
    }
    *out = b;
    return 0;
nomem:
    gb_chunk_builder_destroy(b);
    return gb_error_set(err, GB_ENOMEM, "chunk builder: out of memory for %d streams", streams);
}

void gb_chunk_builder_destroy(gb_chunk_builder *b)
{
    if (!b)
        return;
    gb_chunk c;
    while (gb_chunk_take(b, &c))
        gb_chunk_release(c.block);
    if (b->st)
        for (int s = 0; s < b->streams; s++)
            gb_chunk_release(b->st[s].block);
    free(b->st);
    free(b->queue);
    free(b->carry);
    free(b->overlap_state);
    free(b->stack);
    free(b);
}

const gb_chunk_layout *gb_chunk_builder_layout(const gb_chunk_builder *b) { return &b->layout; }

/* Stream s's current row's observation: whole, or (frame stack) its newest frame, and at row 0
 * its older frames to obs_past. */
static void write_obs_row(gb_chunk_builder *b, stream_state *st, const void *obs)
{
    const gb_chunk_layout *l = &b->layout;
    const uint64_t older = b->obs_bytes - l->frame_bytes; /* 0 without a frame stack */
    memcpy((char *)gb_chunk_column(l, st->block, GB_CHUNK_OBS) + (uint64_t)st->row * l->frame_bytes,
           (const char *)obs + older, l->frame_bytes);
    if (l->past_col >= 0 && st->row == 0)
        memcpy(gb_chunk_column(l, st->block, l->past_col), obs, older);
}

/* Row r's whole observation as the stored frames of block rebuild it, into b->stack. */
static void rebuild_row(gb_chunk_builder *b, void *block, int64_t r)
{
    const gb_chunk_layout *l = &b->layout;
    gb_chunk_stack_row(l, gb_chunk_column(l, block, GB_CHUNK_OBS),
                       gb_chunk_column(l, block, l->past_col),
                       gb_chunk_column(l, block, GB_CHUNK_VALID), r, b->stack);
}

/* With a frame stack: 1 when the observation just written at the stream's row is not what its
 * stored frames rebuild (only its newest frame was stored), else 0. Checked on a block's rows
 * 1..k (their stacks reach into obs_past, and they test the shift rule on every block) and, by
 * the caller, around every episode's end; a mid-episode row after those is left unchecked
 * (the check, a rebuild and a compare of k frames, costs more than the row's own copy). */
static int stack_differs(gb_chunk_builder *b, int s, const void *obs, int always)
{
    stream_state *st = &b->st[s];
    if (b->layout.past_col < 0 || st->row == 0 || (!always && st->row > b->layout.frame_stack))
        return 0;
    rebuild_row(b, st->block, st->row);
    return memcmp(b->stack, obs, b->obs_bytes) != 0;
}

/* Stream s's carry: the state entering its next row (S floats), or NULL without a core. */
static float *carry_of(gb_chunk_builder *b, int s)
{
    return b->carry ? b->carry + (size_t)s * (size_t)b->layout.state_size : NULL;
}

/* The stream's next row is a new episode's first: its state is zeros. */
static void zero_carry(gb_chunk_builder *b, int s)
{
    float *c = carry_of(b, s);
    if (c)
        memset(c, 0, (size_t)b->layout.state_size * sizeof *c);
}

/* The stream's block (re)starts at row 0: its state column is the carry as it is now. */
static void begin_state(gb_chunk_builder *b, int s)
{
    const float *c = carry_of(b, s);
    if (c)
        memcpy(gb_chunk_column(&b->layout, b->st[s].block, GB_CHUNK_STATE), c,
               b->layout.bytes[GB_CHUNK_STATE]);
}

/* The per-step columns (a row of each is bytes / T). */
static const int step_cols[] = {GB_CHUNK_OBS,       GB_CHUNK_ACTION, GB_CHUNK_REWARD,
                                GB_CHUNK_TERMINATED, GB_CHUNK_TRUNCATED, GB_CHUNK_VALID,
                                GB_CHUNK_LOGP,      GB_CHUNK_VERSION};
#define NSTEP_COLS ((int)(sizeof step_cols / sizeof step_cols[0]))

/* A stream with nothing to repeat: its block's first `overlap` rows become padding (zeros, not
 * valid), its state column the carry (zeros: the caller zeroed it), its next row `overlap`. */
static void pad_start(gb_chunk_builder *b, int s)
{
    const gb_chunk_layout *l = &b->layout;
    stream_state *st = &b->st[s];
    for (int i = 0; i < NSTEP_COLS; i++)
        memset(gb_chunk_column(l, st->block, step_cols[i]), 0,
               (size_t)(l->bytes[step_cols[i]] / (uint64_t)l->T * (uint64_t)l->overlap));
    st->row = l->overlap;
    if (l->past_col >= 0 && l->overlap > 0) /* padding rows' stacks are zeros */
        memset(gb_chunk_column(l, st->block, l->past_col), 0, l->bytes[l->past_col]);
    begin_state(b, s);
}

/* Stream s goes on in its block (fresh, or the one it had after a failed allocation) from the
 * full chunk `from`: its last `overlap` rows repeated as rows 0.. (memmove: from may be the
 * block itself), the state entering them as the state column, the next row `overlap`. Without
 * overlap: row 0, its state the carry. */
static void go_on_from(gb_chunk_builder *b, int s, void *from)
{
    const gb_chunk_layout *l = &b->layout;
    stream_state *st = &b->st[s];
    st->row = l->overlap;
    if (l->overlap == 0) {
        begin_state(b, s);
        return;
    }
    if (l->past_col >= 0) /* the repeated row 0's stack, before the move overwrites it */
        rebuild_row(b, from, l->T - l->overlap);
    for (int i = 0; i < NSTEP_COLS; i++) {
        int c = step_cols[i];
        uint64_t row = l->bytes[c] / (uint64_t)l->T;
        memmove(gb_chunk_column(l, st->block, c),
                (char *)gb_chunk_column(l, from, c) + row * (uint64_t)(l->T - l->overlap),
                (size_t)(row * (uint64_t)l->overlap));
    }
    if (l->past_col >= 0)
        memcpy(gb_chunk_column(l, st->block, l->past_col), b->stack, l->bytes[l->past_col]);
    if (b->overlap_state)
        memcpy(gb_chunk_column(l, st->block, GB_CHUNK_STATE),
               b->overlap_state + (size_t)s * (size_t)l->state_size, l->bytes[GB_CHUNK_STATE]);
}

void gb_chunk_start(gb_chunk_builder *b, int s, const void *obs)
{
    stream_state *st = &b->st[s];
    st->row = 0;
    st->valid_rows = 0;
    st->newest_version = -1;
    zero_carry(b, s);
    pad_start(b, s);
    write_obs_row(b, st, obs);
}

void gb_chunk_set_state(gb_chunk_builder *b, int s, const float *state)
{
    float *c = carry_of(b, s);
    int64_t n = b->layout.state_size - b->layout.return_carry;
    if (c && n > 0)
        memcpy(c, state, (size_t)n * sizeof *c);
}

/* A valid row's reward into the stream's discounted return (the carry's last float). */
static void carry_reward(gb_chunk_builder *b, int s, float reward)
{
    if (!b->layout.return_carry)
        return;
    float *r = carry_of(b, s) + b->layout.state_size - 1;
    *r = (float)(b->layout.gamma * (double)*r + (double)reward);
}

void gb_chunk_act(gb_chunk_builder *b, int s, const void *action, float logp, int64_t version)
{
    stream_state *st = &b->st[s];
    const gb_chunk_layout *l = &b->layout;
    int64_t r = st->row;
    memcpy((char *)gb_chunk_column(l, st->block, GB_CHUNK_ACTION) + (uint64_t)r * b->action_bytes,
           action, b->action_bytes);
    ((float *)gb_chunk_column(l, st->block, GB_CHUNK_LOGP))[r] = logp;
    ((int64_t *)gb_chunk_column(l, st->block, GB_CHUNK_VERSION))[r] = version;
    if (version > st->newest_version)
        st->newest_version = version;
}

/* Row r is complete; advance. When the chunk is full, next_obs completes it: queue it and go
 * on in a new block (go_on_from). Returns 0 or GB_ENOMEM (then the finished chunk is dropped and
 * the stream goes on in the block it had, as it would in a new one: it never holds a NULL
 * block). */
static int advance(gb_chunk_builder *b, int s, const void *next_obs, gb_error *err)
{
    stream_state *st = &b->st[s];
    const gb_chunk_layout *l = &b->layout;
    if (++st->row == l->T - l->overlap && b->overlap_state) /* the next chunk's state */
        memcpy(b->overlap_state + (size_t)s * (size_t)l->state_size, carry_of(b, s),
               l->bytes[GB_CHUNK_STATE]);
    if (st->row < l->T)
        return 0;
    void *fresh = block_new(l), *full = st->block;
    int64_t valid = st->valid_rows, version = st->newest_version;
    st->valid_rows = 0;
    st->newest_version = -1;
    if (!fresh) {
        go_on_from(b, s, full);
        return gb_error_set(err, GB_ENOMEM, "chunk builder: out of memory for a new chunk "
                            "(stream %d: its last %lld steps are dropped)", s,
                            (long long)(l->T - l->overlap));
    }
    memcpy(gb_chunk_column(l, full, GB_CHUNK_NEXT_OBS), next_obs, b->obs_bytes);
    st->block = fresh;
    go_on_from(b, s, full);
    if (b->qlen < b->qcap) {
        gb_chunk *q = &b->queue[(b->qhead + b->qlen++) % b->qcap];
        q->block = full;
        q->stream = s;
        q->policy_version = version;
        q->steps = valid;
    } else {
        gb_chunk_release(full); /* the caller never takes: cannot happen when used right */
    }
    return 0;
}

static void set_row(gb_chunk_builder *b, stream_state *st, float reward, int terminated,
                    int truncated, int valid)
{
    const gb_chunk_layout *l = &b->layout;
    int64_t r = st->row;
    ((float *)gb_chunk_column(l, st->block, GB_CHUNK_REWARD))[r] = reward;
    ((uint8_t *)gb_chunk_column(l, st->block, GB_CHUNK_TERMINATED))[r] = (uint8_t)terminated;
    ((uint8_t *)gb_chunk_column(l, st->block, GB_CHUNK_TRUNCATED))[r] = (uint8_t)truncated;
    ((uint8_t *)gb_chunk_column(l, st->block, GB_CHUNK_VALID))[r] = (uint8_t)valid;
    st->valid_rows += valid;
}

/* The stack check's error (see gb_chunk_step). */
static int stack_error(int s, gb_error *err)
{
    return gb_error_set(err, GB_ECORRUPT, "chunk builder: stream %d: an observation's older "
                        "frames are not the frames of its stream's rows before it (this "
                        "environment does not stack frames as env.wrappers.frame_stack does; "
                        "runtime/streams/chunk.h \"Frame stacks\")", s);
}

int gb_chunk_step(gb_chunk_builder *b, int s, float reward, int terminated, int truncated,
                  int ended, const void *final_obs, const void *obs, gb_error *err)
{
    stream_state *st = &b->st[s];
    set_row(b, st, reward, terminated, truncated, 1);
    carry_reward(b, s, reward);
    int rc = advance(b, s, ended ? final_obs : obs, err);
    if (rc) {
        if (ended) { /* it restarts at the new episode's first observation: from zeros */
            zero_carry(b, s);
            pad_start(b, s);
        }
        write_obs_row(b, st, obs); /* the stream restarts at obs */
        return rc;
    }
    if (!ended) {
        write_obs_row(b, st, obs);
        return stack_differs(b, s, obs, 0) ? stack_error(s, err) : 0;
    }
    /* The reset row: the final observation, an ignored action, no reward, not valid. */
    write_obs_row(b, st, final_obs);
    int differs = stack_differs(b, s, final_obs, 1);
    const gb_chunk_layout *l = &b->layout;
    memset((char *)gb_chunk_column(l, st->block, GB_CHUNK_ACTION) +
               (uint64_t)st->row * b->action_bytes, 0, b->action_bytes);
    ((float *)gb_chunk_column(l, st->block, GB_CHUNK_LOGP))[st->row] = 0.0f;
    ((int64_t *)gb_chunk_column(l, st->block, GB_CHUNK_VERSION))[st->row] =
        st->newest_version;
    set_row(b, st, 0.0f, 0, 0, 0);
    zero_carry(b, s); /* the row after the reset row starts the new episode */
    rc = advance(b, s, obs, err);
    write_obs_row(b, st, obs);
    if (rc == 0 && (stack_differs(b, s, obs, 1) || differs))
        rc = stack_error(s, err);
    return rc;
}

int gb_chunk_take(gb_chunk_builder *b, gb_chunk *out)
{
    if (b->qlen == 0)
        return 0;
    *out = b->queue[b->qhead];
    b->qhead = (b->qhead + 1) % b->qcap;
    b->qlen--;
    return 1;
}

void gb_chunk_column_item(const gb_chunk_layout *l, int c, int *ndim, const int64_t **shape,
                          int *per_item)
{
    const gb_tensor_desc *d = &l->desc[c];
    *per_item = c == GB_CHUNK_NEXT_OBS || c == GB_CHUNK_STATE || c == l->past_col;
    *ndim = *per_item ? d->rank : d->rank - 1;
    *shape = *per_item ? d->shape : d->shape + 1;
}

int gb_chunk_matches(const gb_chunk_layout *l, const gb_tensor_desc *descs, int n)
{
    if (n != l->ncols)
        return 0;
    for (int c = 0; c < l->ncols; c++) {
        const gb_tensor_desc *a = &descs[c], *b = &l->desc[c];
        if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->rank != b->rank ||
            memcmp(a->shape, b->shape, (size_t)a->rank * sizeof a->shape[0]) != 0)
            return 0;
    }
    return 1;
}

/* One pass over n float32 values: sets *nonfinite when one is NaN or infinite (exponent bits all
 * ones) and returns the largest magnitude among the others and the infinities, as the bits of a
 * non-negative float: for those values the order of |x| is the order of its bits as unsigned
 * integers (a NaN's bits lie above an infinity's and are left out). Integer compares, no branch
 * in the loop and no early exit, so the compiler vectorises it (and -ffast-math cannot fold it
 * away as it may fold isfinite). Data from the wire need not be aligned: memcpy. */
static uint32_t f32_scan(const void *p, size_t n, int *nonfinite)
{
    const unsigned char *b = p;
    uint32_t bad = 0, most = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, b + 4 * i, 4);
        bad |= (uint32_t)((w & 0x7f800000u) == 0x7f800000u);
        uint32_t mag = w & 0x7fffffffu;
        mag = mag > 0x7f800000u ? 0 : mag;
        most = mag > most ? mag : most;
    }
    *nonfinite = bad != 0;
    return most;
}

void gb_chunk_scan_floats(const gb_chunk_layout *l, const void *const cols[GB_CHUNK_NCOLS],
                          gb_chunk_scan *s)
{
    s->nonfinite = -1;
    for (int c = 0; c < GB_CHUNK_NCOLS; c++) {
        s->max_abs[c] = 0;
        if (c >= l->ncols || l->desc[c].dtype != GB_DTYPE_FLOAT32)
            continue;
        int bad;
        uint32_t bits = f32_scan(cols[c], l->bytes[c] / 4, &bad);
        memcpy(&s->max_abs[c], &bits, sizeof bits);
        if (bad && s->nonfinite < 0)
            s->nonfinite = c;
    }
}

int gb_chunk_nonfinite(const gb_chunk_layout *l, const void *const cols[GB_CHUNK_NCOLS])
{
    gb_chunk_scan s;
    gb_chunk_scan_floats(l, cols, &s);
    return s.nonfinite;
}
