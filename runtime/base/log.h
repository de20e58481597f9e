/* runtime/base/log.h: the one logger. Every line carries UTC time, level, and the worker's role and
 * index: "2026-11-20T23:50:01.123Z INFO  trainer-0 replay full, evicting (fifo)".
 * defines: gb_log_init, gb_log_open_file, gb_log_close, gb_log_set_level, gb_log, gb_log_due,
 *          GB_LOG_*, gb_log_file_errno, gb_log_stderr_errno */
#ifndef GB_RUNTIME_LOG_H
#define GB_RUNTIME_LOG_H

#include <stdarg.h>
#include <stdint.h>

typedef enum gb_log_level {
    GB_LOG_ERROR = 0,
    GB_LOG_WARN = 1,
    GB_LOG_INFO = 2,
    GB_LOG_DEBUG = 3,
} gb_log_level;

/* Sets the identity printed in every line (role "launcher", "actor", ...; index >= 0, or -1 for
 * none) and the lowest level that is written. Process-wide; call once at start. */
void gb_log_init(const char *role, int index, gb_log_level level);

/* Also writes every line to path (appending). Returns 0 or GB_ESYS. */
int gb_log_open_file(const char *path);

/* Closes the file opened by gb_log_open_file, if any. */
void gb_log_close(void);

void gb_log_set_level(gb_log_level level);
gb_log_level gb_log_get_level(void);

/* Parses "error", "warn", "info", "debug"; returns 0 or GB_EINVAL. */
int gb_log_parse_level(const char *name, gb_log_level *out);

/* The errno of the first failed write to the file of gb_log_open_file (ENOSPC: the disk is
 * full), and to stderr (a worker's stderr is its log file); 0 while none failed. A logger has
 * nowhere to report its own failure: the program asks. */
int gb_log_file_errno(void);
int gb_log_stderr_errno(void);

/* When 0, lines go only to the file (workers whose stderr is their log file set this). */
void gb_log_set_stderr(int on);

/* Writes one line, atomically with respect to other threads and processes appending to the same
 * file (one write(2) per line). Thread-safe; never blocks on anything but the write. */
void gb_log(gb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gb_vlog(gb_log_level level, const char *fmt, va_list ap);

/* Rate limit for a warning that a peer can repeat at will (malformed messages, drops): given
 * how many times it has happened so far (count >= 1, counted before the call), 1 when this
 * occurrence should be logged: the 1st, 2nd, 4th, 8th, ... So n events write about log2(n) + 1
 * lines, and a flood of a million writes 21. The line should say the count. */
static inline int gb_log_due(uint64_t count) { return count && (count & (count - 1)) == 0; }

#define GB_ERROR(...) gb_log(GB_LOG_ERROR, __VA_ARGS__)
#define GB_WARN(...) gb_log(GB_LOG_WARN, __VA_ARGS__)
#define GB_INFO(...) gb_log(GB_LOG_INFO, __VA_ARGS__)
#define GB_DEBUG(...)                                                                            \
    do {                                                                                         \
        if (gb_log_get_level() >= GB_LOG_DEBUG)                                                  \
            gb_log(GB_LOG_DEBUG, __VA_ARGS__);                                                   \
    } while (0)

#endif
