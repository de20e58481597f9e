/* tests/runtime/streams/test_wire_doc.c: docs/protocol.md holds every runtime message table exactly
 * as gb_wire_schema_markdown prints it, between the markers below; the test fails when the page and
 * the tables disagree. `test_wire_doc --print` prints the section to paste into the page. */
#include "runtime/streams/wire_messages.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BEGIN_MARK "<!-- wire tables: begin (printed by test_wire_doc --print) -->\n"
#define END_MARK "<!-- wire tables: end -->\n"

/* The section as the tables print it (malloc'd, NUL-terminated). */
static char *generate(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(BEGIN_MARK "\n", f);
    for (int i = 0; i < gb_wire_runtime_nschemas; i++)
        if (gb_wire_schema_markdown(gb_wire_runtime_schemas[i], f) != 0)
            break;
    fputs(END_MARK, f);
    fclose(f);
    return buf;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* 0 when page holds want between the markers, else 1 with the first differing line said. */
static int compare(const char *page, const char *want)
{
    const char *a = strstr(page, BEGIN_MARK), *b = a ? strstr(a, END_MARK) : NULL;
    if (!a || !b) {
        fprintf(stderr, "docs/protocol.md: no section between '%.30s...' and '%.25s'\n",
                BEGIN_MARK, END_MARK);
        return 1;
    }
    size_t have = (size_t)(b - a) + strlen(END_MARK);
    if (have == strlen(want) && memcmp(a, want, have) == 0)
        return 0;
    int line = 1;
    size_t i = 0;
    while (i < have && want[i] && a[i] == want[i])
        line += a[i++] == '\n';
    const char *pl = a + i, *wl = want + i;
    while (pl > a && pl[-1] != '\n')
        pl--, wl--;
    fprintf(stderr, "docs/protocol.md disagrees with the tables at line %d of the section:\n"
                    "  page:   %.*s\n  tables: %.*s\n(regenerate it: test_wire_doc --print)\n",
            line, (int)strcspn(pl, "\n"), pl, (int)strcspn(wl, "\n"), wl);
    return 1;
}

int main(int argc, char **argv)
{
    char *want = generate();
    if (!want)
        return 2;
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        fputs(want, stdout);
        free(want);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s docs/protocol.md | --print\n", argv[0]);
        return 2;
    }
    char *page = read_all(argv[1]);
    CHECK_MSG(page != NULL, "cannot read %s", argv[1]);
    if (page) {
        CHECK(compare(page, want) == 0);
        /* and the comparison notices a change: one character of the first table row */
        char *row = strstr(strstr(page, BEGIN_MARK), "| `");
        CHECK(row != NULL);
        if (row) {
            row[3] = row[3] == 'x' ? 'y' : 'x';
            fprintf(stderr, "(a page changed on purpose:)\n");
            CHECK(compare(page, want) == 1);
        }
    }
    free(page);
    free(want);
    return test_main_result();
}
