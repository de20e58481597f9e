/* tests/workers/config_text.h: a config from YAML text, as a run would load and finish it (the
 * checks and defaults of gb_config_finish), for the workers' tests; the error on stderr.
 * defines: config_text */
#ifndef GB_TESTS_WORKERS_CONFIG_TEXT_H
#define GB_TESTS_WORKERS_CONFIG_TEXT_H

#include "runtime/config/config.h"

#include <stdio.h>
#include <string.h>

/* Loads text into *cfg and finishes it. Returns 0 or the loader's error. */
static inline int config_text(gb_config *cfg, const char *text)
{
    gb_error err = {0};
    gb_config_marks *marks = NULL;
    int rc = gb_config_load_string(cfg, &marks, "<test>", text, strlen(text), &err);
    if (!rc)
        rc = gb_config_finish(cfg, marks, &err);
    gb_config_marks_free(marks);
    if (rc)
        fprintf(stderr, "config: %s\n", err.msg);
    return rc;
}

#endif
