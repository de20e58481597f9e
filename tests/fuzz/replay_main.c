/* tests/fuzz/replay_main.c: runs the fuzz target on every file of a corpus directory (a ctest,
 * built without libFuzzer), or with --generate DIR writes the seed corpus from real headers. */
#include "runtime/wire.h"
#include "runtime/wire_messages.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int write_seed(const char *dir, const char *name, const gb_wire_header *h, int nframes,
                      const uint32_t *lens, int truncate)
{
    unsigned char buf[1 + 40 * 4 + GB_WIRE_HEADER_MAX];
    size_t len;
    gb_error err;
    buf[0] = (unsigned char)nframes;
    for (int i = 0; i < nframes; i++)
        for (int b = 0; b < 4; b++)
            buf[1 + 4 * i + b] = (unsigned char)(lens[i] >> (8 * b));
    size_t off = 1 + 4 * (size_t)nframes;
    if (gb_wire_encode_header(h, buf + off, GB_WIRE_HEADER_MAX, &len, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    len += off;
    if (truncate)
        len -= (size_t)truncate;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        perror(path);
        return 1;
    }
    fclose(f);
    return 0;
}

static int generate_control(const char *dir);
static int generate_minimal(const char *dir);

/* Seeds of the data streams (inference, samples); then the control messages' and a minimal one. */
static int generate(const char *dir)
{
    gb_wire_header h;
    int rc = 0;
    int64_t obs[2] = {64, 4}, pix[4] = {64, 84, 84, 1};
    uint32_t l_obs[3] = {64 * 4 * 4, 64 * 84 * 84, 64 * 4};
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 3);
    h.seq = 17;
    h.ntensors = 1;
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, obs, NULL);
    rc |= write_seed(dir, "infer_request", &h, 1, l_obs, 0);
    rc |= write_seed(dir, "infer_request_truncated", &h, 1, l_obs, 3);
    rc |= write_seed(dir, "infer_request_no_frames", &h, 0, l_obs, 0);
    h.ntensors = 2;
    gb_wire_set_tensor(&h.tensors[1], "pixels", GB_DTYPE_UINT8, 4, pix, NULL);
    uint32_t l2[2] = {64 * 4 * 4, 64 * 84 * 84};
    rc |= write_seed(dir, "infer_request_pixels", &h, 2, l2, 0);
    gb_wire_header_init(&h, GB_MSG_INFER_REPLY, GB_ROLE_POLICY, 0);
    h.seq = 17;
    h.policy_version = 123456;
    h.ntensors = 3;
    int64_t rows[1] = {64};
    gb_wire_set_tensor(&h.tensors[0], "action", GB_DTYPE_INT64, 1, rows, NULL);
    gb_wire_set_tensor(&h.tensors[1], "logp", GB_DTYPE_FLOAT32, 1, rows, NULL);
    gb_wire_set_tensor(&h.tensors[2], "value", GB_DTYPE_FLOAT32, 1, rows, NULL);
    uint32_t l3[3] = {512, 256, 256};
    rc |= write_seed(dir, "infer_reply", &h, 3, l3, 0);
    h.status = GB_EPROTO;
    h.ntensors = 0;
    snprintf(h.text, sizeof h.text, "tensor 'obs': first dimension must be rows");
    rc |= write_seed(dir, "infer_error", &h, 0, l3, 0);
    gb_wire_header_init(&h, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 1);
    h.seq = 99;
    h.policy_version = 7;
    h.ntensors = 5;
    int64_t tr[3] = {128, 8, 4}, t1[2] = {128, 8};
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 3, tr, NULL);
    gb_wire_set_tensor(&h.tensors[1], "reward", GB_DTYPE_FLOAT32, 2, t1, NULL);
    gb_wire_set_tensor(&h.tensors[2], "terminated", GB_DTYPE_BOOL, 2, t1, NULL);
    gb_wire_set_tensor(&h.tensors[3], "truncated", GB_DTYPE_BOOL, 2, t1, NULL);
    gb_wire_set_tensor(&h.tensors[4], "action", GB_DTYPE_BFLOAT16, 2, t1, NULL);
    uint32_t l5[5] = {128 * 8 * 16, 128 * 8 * 4, 128 * 8, 128 * 8, 128 * 8 * 2};
    rc |= write_seed(dir, "sample", &h, 5, l5, 0);
    return rc | generate_control(dir) | generate_minimal(dir);
}

/* Seeds of the parameter stream and the registry, their attributes written by their tables. */
static int generate_control(const char *dir)
{
    gb_wire_header h;
    gb_error err;
    int rc = 0;
    int64_t blob[1] = {4194304};
    gb_wire_header_init(&h, GB_MSG_PARAM_BEGIN, GB_ROLE_TRAINER, 0);
    gb_msg_param q = {.version = 5, .total = 1LL << 33, .chunk = 4194304};
    rc |= gb_wire_schema_write(&gb_schema_param_begin, &q, &h, &err);
    h.ntensors = 1;
    int64_t lay[1] = {208 * 3};
    gb_wire_set_tensor(&h.tensors[0], "layout", GB_DTYPE_UINT8, 1, lay, NULL);
    uint32_t ll[1] = {208 * 3};
    rc |= write_seed(dir, "param_begin", &h, 1, ll, 0);
    gb_wire_header_init(&h, GB_MSG_PARAM_CHUNK, GB_ROLE_PARAMS, 0);
    q = (gb_msg_param){.version = 5, .offset = 3LL << 31, .serial = 1764300000000000000LL};
    rc |= gb_wire_schema_write(&gb_schema_param_chunk, &q, &h, &err);
    h.ntensors = 1;
    gb_wire_set_tensor(&h.tensors[0], "data", GB_DTYPE_UINT8, 1, blob, NULL);
    uint32_t lb[1] = {4194304};
    rc |= write_seed(dir, "param_chunk", &h, 1, lb, 0);
    gb_wire_header_init(&h, GB_MSG_PARAM_END, GB_ROLE_TRAINER, 0);
    q = (gb_msg_param){.version = 5, .total = 1LL << 33, .crc = 0xE3069283};
    rc |= gb_wire_schema_write(&gb_schema_param_end, &q, &h, &err);
    rc |= write_seed(dir, "param_end", &h, 0, NULL, 0);
    gb_wire_header_init(&h, GB_MSG_REG_REGISTER, GB_ROLE_POLICY, 2);
    gb_msg_reg_register r = {.ttl_ms = 3000};
    rc |= gb_wire_schema_write(&gb_schema_reg_register, &r, &h, &err);
    h.ntensors = 2;
    int64_t nl[1] = {18}, el[1] = {30};
    gb_wire_set_tensor(&h.tensors[0], "name", GB_DTYPE_UINT8, 1, nl, NULL);
    gb_wire_set_tensor(&h.tensors[1], "endpoint", GB_DTYPE_UINT8, 1, el, NULL);
    uint32_t lr[2] = {18, 30};
    rc |= write_seed(dir, "reg_register", &h, 2, lr, 0);
    return rc;
}

static int generate_minimal(const char *dir)
{
    gb_wire_header h;
    int64_t one[1] = {1};
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 0);
    h.ntensors = 1;
    gb_wire_set_tensor(&h.tensors[0], "s", GB_DTYPE_FLOAT64, 1, one, NULL);
    return write_seed(dir, "minimal", &h, 1, (uint32_t[]){8}, 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--generate") == 0)
        return generate(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR | --generate DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        static unsigned char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        unsigned char *copy = malloc(n ? n : 1); /* exact size, for sanitizer builds */
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
        files++;
    }
    closedir(d);
    fprintf(stderr, "replayed %d corpus files\n", files);
    return files > 0 ? 0 : 1;
}
