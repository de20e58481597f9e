/* tests/serve/test_serve_doc.c: the data server's message tables (workers/server_protocol.c)
 * agree with their two copies: docs/protocol.md holds them exactly as gb_wire_schema_markdown
 * prints them, between the markers below, and the Python client's REQUEST_ATTRS and
 * REPLY_ATTRS (workers/client/python/gearbox_client.py) name each table's attributes in order.
 * `test_serve_doc --print` prints the page's section. */
#include "test.h"
#include "workers/server_protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BEGIN_MARK "<!-- serve tables: begin (printed by test_serve_doc --print) -->\n"
#define END_MARK "<!-- serve tables: end -->\n"

/* What f holds, NUL-terminated (malloc'd), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    else {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

/* The page's section as the tables print it (malloc'd). */
static char *section(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(BEGIN_MARK "\n", f);
    for (int i = 0; i < gb_serve_nschemas; i++)
        gb_wire_schema_markdown(gb_serve_schemas[i], f);
    fputs(END_MARK, f);
    fclose(f);
    return buf;
}

/* The Python line that mirrors op's table s: `    OP_NAME: ("a", "b", ...),` with the
 * attribute names in the table's order (wrapped lines joined; "()" for none). */
static void check_python(const char *py, const char *dict, const char *op,
                         const gb_wire_schema *s)
{
    const char *d = strstr(py, dict), *at = d ? strstr(d, op) : NULL;
    CHECK_MSG(at != NULL, "%s has no entry %s", dict, op);
    if (!at)
        return;
    at += strlen(op);
    for (int k = 0; k < s->nattrs; k++) {
        char want[64];
        snprintf(want, sizeof want, "\"%s\"", s->attrs[k].name);
        const char *next = strstr(at, want), *close = strchr(at, ')');
        CHECK_MSG(next && close && next < close, "%s[%s]: '%s' missing or out of order", dict,
                  op, s->attrs[k].name);
        if (!next || !close || next > close)
            return;
        at = next + strlen(want);
    }
    const char *close = strchr(at, ')');
    CHECK_MSG(close && !memchr(at, '"', (size_t)(close - at)), "%s[%s]: more names than %s",
              dict, op, s->name);
}

int main(int argc, char **argv)
{
    char *want = section();
    if (!want)
        return 2;
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        fputs(want, stdout);
        free(want);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s docs/protocol.md gearbox_client.py | --print\n", argv[0]);
        return 2;
    }
    char *page = slurp(argv[1]), *py = slurp(argv[2]);
    CHECK_MSG(page && py, "cannot read %s or %s", argv[1], argv[2]);
    if (page)
        CHECK_MSG(strstr(page, want) != NULL, "docs/protocol.md's serve tables disagree with "
                  "workers/server_protocol.c (regenerate: test_serve_doc --print)");
    static const char *const ops[GB_SERVE_OP_END] = {NULL,      "OP_INFO:",   "OP_SAMPLE:",
                                                     "OP_INSERT:", "OP_UPDATE:",
                                                     "OP_CHECKPOINT:"};
    for (int op = GB_SERVE_INFO; py && op < GB_SERVE_OP_END; op++) {
        check_python(py, "REQUEST_ATTRS = {", ops[op], gb_serve_request_schemas[op]);
        check_python(py, "REPLY_ATTRS = {", ops[op], gb_serve_reply_schemas[op]);
    }
    free(page);
    free(py);
    free(want);
    return test_main_result();
}
