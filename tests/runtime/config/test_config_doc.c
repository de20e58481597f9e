/* tests/runtime/config/test_config_doc.c: docs/config-reference.md holds every config key exactly
 * as gb_config_markdown prints the schema (runtime/config/config_schema.c), between the markers
 * below; the test fails when the page is stale. `test_config_doc --print` prints the section. */
#include "doc_section.h"
#include "runtime/config/config.h"

#include <stdio.h>

#define BEGIN_MARK "<!-- config keys: begin (printed by test_config_doc --print) -->\n"
#define END_MARK "<!-- config keys: end -->\n"

/* The section as the schema prints it (malloc'd, NUL-terminated), or NULL. */
static char *generate(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(BEGIN_MARK, f);
    int rc = gb_config_markdown(f);
    fputs("\n" END_MARK, f);
    if (fclose(f) != 0 || rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

int main(int argc, char **argv)
{
    return doc_section_main(argc, argv, generate(), BEGIN_MARK, END_MARK,
                            "docs/config-reference.md");
}
