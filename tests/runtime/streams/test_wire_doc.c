/* tests/runtime/streams/test_wire_doc.c: docs/protocol.md holds every runtime message table exactly
 * as gb_wire_schema_markdown prints it, between the markers below; the test fails when the page and
 * the tables disagree. `test_wire_doc --print` prints the section to paste into the page. */
#include "runtime/streams/wire_messages.h"
#include "doc_section.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BEGIN_MARK "<!-- wire tables: begin (printed by test_wire_doc --print) -->\n"
#define END_MARK "<!-- wire tables: end -->\n"

/* Every runtime message table as gb_wire_schema_markdown prints it, after a blank line. */
static int write_tables(FILE *f)
{
    fputs("\n", f);
    for (int i = 0; i < gb_wire_runtime_nschemas; i++)
        if (gb_wire_schema_markdown(gb_wire_runtime_schemas[i], f) != 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    char *want = doc_generate(BEGIN_MARK, write_tables, END_MARK);
    return doc_section_main(argc, argv, want, BEGIN_MARK, END_MARK, "docs/protocol.md");
}
