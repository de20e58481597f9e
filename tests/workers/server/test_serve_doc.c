/* tests/workers/server/test_serve_doc.c: the data server's message tables
 * (workers/server/server_protocol.c) agree with their two copies: docs/protocol.md holds them
 * exactly as gb_wire_schema_markdown prints them, between the markers below, and the Python
 * client's REQUEST_ATTRS and
 * REPLY_ATTRS (workers/server/client/python/gearbox_client.py) name each table's attributes in
 * order. `test_serve_doc --print` prints the page's section. */
#include "doc_section.h"
#include "workers/server/server_protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BEGIN_MARK "<!-- serve tables: begin (printed by test_serve_doc --print) -->\n"
#define END_MARK "<!-- serve tables: end -->\n"

/* Table s as gb_wire_schema_markdown prints it (malloc'd), or NULL. */
static char *markdown(const gb_wire_schema *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = gb_wire_schema_markdown(s, f);
    if (fclose(f) != 0 || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Every table, in order, between the page's markers; with print, the section to paste. */
static void check_page(const char *page, int print)
{
    const char *at = page ? strstr(page, BEGIN_MARK) : NULL;
    const char *end = at ? strstr(at, END_MARK) : NULL;
    if (print)
        printf("%s\n", BEGIN_MARK);
    else
        CHECK_MSG(at && end, "docs/protocol.md: no section between its serve tables markers");
    for (int i = 0; i < gb_serve_nschemas && (print || (at && end)); i++) {
        char *md = markdown(gb_serve_schemas[i]);
        CHECK(md != NULL);
        if (md && print)
            fputs(md, stdout);
        else if (md) {
            const char *found = strstr(at, md);
            CHECK_MSG(found && found < end, "docs/protocol.md: table %s is not as the code "
                      "declares it, in order (regenerate: test_serve_doc --print)",
                      gb_serve_schemas[i]->name);
            at = found && found < end ? found + strlen(md) : at;
        }
        free(md);
    }
    if (print)
        fputs(END_MARK, stdout);
    else if (at && end)
        CHECK_MSG(at + 1 == end || at == end, "docs/protocol.md: more in the serve tables "
                  "section than the tables");
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
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        check_page(NULL, 1);
        return test_main_result();
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s docs/protocol.md gearbox_client.py | --print\n", argv[0]);
        return 2;
    }
    char *page = doc_read_all(argv[1]), *py = doc_read_all(argv[2]);
    CHECK_MSG(page && py, "cannot read %s or %s", argv[1], argv[2]);
    if (page)
        check_page(page, 0);
    static const char *const ops[GB_SERVE_OP_END] = {NULL,      "OP_INFO:",   "OP_SAMPLE:",
                                                     "OP_INSERT:", "OP_UPDATE:",
                                                     "OP_CHECKPOINT:"};
    for (int op = GB_SERVE_INFO; py && op < GB_SERVE_OP_END; op++) {
        check_python(py, "REQUEST_ATTRS = {", ops[op], gb_serve_request_schemas[op]);
        check_python(py, "REPLY_ATTRS = {", ops[op], gb_serve_reply_schemas[op]);
    }
    free(page);
    free(py);
    return test_main_result();
}
