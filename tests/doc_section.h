/* tests/doc_section.h: a page of docs/ that holds a generated section between two marker lines,
 * checked against what the code generates (test_wire_doc, test_config_doc): read the page,
 * compare the section, say the first line that differs and how to regenerate it.
 * defines: doc_read_all, doc_generate, doc_compare, doc_section_main */
#ifndef GB_TESTS_DOC_SECTION_H
#define GB_TESTS_DOC_SECTION_H

#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the file at path holds, NUL-terminated (malloc'd; the caller frees it), or NULL. */
static inline char *doc_read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while (m && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    int bad = ferror(f);
    fclose(f);
    if (m && fclose(m) == 0 && !bad)
        return buf;
    free(buf);
    return NULL;
}

/* The section: begin, what write puts (it returns 0 or an error), then end (malloc'd,
 * NUL-terminated; the caller frees it), or NULL when writing failed. */
static inline char *doc_generate(const char *begin, int (*write)(FILE *), const char *end)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(begin, f);
    int rc = write(f);
    fputs(end, f);
    if (fclose(f) != 0 || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* 0 when page holds want (which starts with begin and ends with end) between its markers, else
 * 1 with the first differing line said on stderr, naming the page and the regenerating tool. */
static inline int doc_compare(const char *page, const char *want, const char *begin,
                              const char *end, const char *name, const char *tool)
{
    const char *a = strstr(page, begin), *b = a ? strstr(a, end) : NULL;
    if (!a || !b) {
        fprintf(stderr, "%s: no section between '%.30s...' and '%.25s'\n", name, begin, end);
        return 1;
    }
    size_t have = (size_t)(b - a) + strlen(end);
    if (have == strlen(want) && memcmp(a, want, have) == 0)
        return 0;
    int line = 1;
    size_t i = 0;
    while (i < have && want[i] && a[i] == want[i])
        line += a[i++] == '\n';
    const char *pl = a + i, *wl = want + i;
    while (pl > a && pl[-1] != '\n')
        pl--, wl--;
    fprintf(stderr, "%s disagrees with the code at line %d of the section:\n"
                    "  page: %.*s\n  code: %.*s\n(regenerate it: %s --print)\n",
            name, line, (int)strcspn(pl, "\n"), pl, (int)strcspn(wl, "\n"), wl, tool);
    return 1;
}

/* The main of a doc test: `tool --print` prints want; `tool PAGE` checks PAGE's section, and
 * that the comparison notices a change of one character in the section's first table row
 * (`| ` then a backquote). Takes want (malloc'd; NULL: the generator failed). */
static inline int doc_section_main(int argc, char **argv, char *want, const char *begin,
                                   const char *end, const char *name)
{
    if (!want)
        return 2;
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        fputs(want, stdout);
        free(want);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s %s | --print\n", argv[0], name);
        free(want);
        return 2;
    }
    char *page = doc_read_all(argv[1]);
    CHECK_MSG(page != NULL, "cannot read %s", argv[1]);
    if (page) {
        CHECK(doc_compare(page, want, begin, end, name, argv[0]) == 0);
        char *sec = strstr(page, begin), *row = sec ? strstr(sec, "| `") : NULL;
        CHECK(row != NULL);
        if (row) {
            row[3] = row[3] == 'x' ? 'y' : 'x';
            fprintf(stderr, "(a page changed on purpose:)\n");
            CHECK(doc_compare(page, want, begin, end, name, argv[0]) == 1);
        }
    }
    free(page);
    free(want);
    return test_main_result();
}

#endif
