/* tests/runtime/config/test_config_doc.c: docs/config-reference.md holds every config key exactly
 * as gb_config_markdown prints the schema (runtime/config/config_schema.c), between the markers
 * below; the test fails when the page is stale. `test_config_doc --print` prints the section. */
#include "doc_section.h"
#include "runtime/config/config.h"

#include <stdio.h>

#define BEGIN_MARK "<!-- config keys: begin (printed by test_config_doc --print) -->\n"
#define END_MARK "<!-- config keys: end -->\n"

int main(int argc, char **argv)
{
    char *want = doc_generate(BEGIN_MARK, gb_config_markdown, "\n" END_MARK);
    return doc_section_main(argc, argv, want, BEGIN_MARK, END_MARK, "docs/config-reference.md");
}
