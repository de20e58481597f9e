/* runtime/base/log.c: the logger (see log.h). */
#include "runtime/base/log.h"

#include "runtime/base/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_role[32] = "gearbox";
static int g_index = -1;
static atomic_int g_level = GB_LOG_INFO;
static atomic_int g_file_fd = -1;
static atomic_int g_to_stderr = 1;

static const char *level_name(gb_log_level level)
{
    switch (level) {
    case GB_LOG_ERROR: return "ERROR";
    case GB_LOG_WARN: return "WARN ";
    case GB_LOG_INFO: return "INFO ";
    default: return "DEBUG";
    }
}

void gb_log_init(const char *role, int index, gb_log_level level)
{
    snprintf(g_role, sizeof g_role, "%s", role ? role : "gearbox");
    g_index = index;
    atomic_store(&g_level, level);
}

int gb_log_open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return GB_ESYS;
    int old = atomic_exchange(&g_file_fd, fd);
    if (old >= 0)
        close(old);
    return 0;
}

void gb_log_close(void)
{
    int old = atomic_exchange(&g_file_fd, -1);
    if (old >= 0)
        close(old);
}

void gb_log_set_level(gb_log_level level) { atomic_store(&g_level, level); }
gb_log_level gb_log_get_level(void) { return (gb_log_level)atomic_load(&g_level); }
void gb_log_set_stderr(int on) { atomic_store(&g_to_stderr, on); }

int gb_log_parse_level(const char *name, gb_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (gb_log_level)i;
            return 0;
        }
    }
    return GB_EINVAL;
}

static atomic_int g_file_errno, g_stderr_errno;

int gb_log_file_errno(void) { return atomic_load(&g_file_errno); }
int gb_log_stderr_errno(void) { return atomic_load(&g_stderr_errno); }

/* Writes buf; on failure remembers the first errno in *failed (see gb_log_file_errno). */
static void write_all(int fd, const char *buf, size_t len, atomic_int *failed)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int zero = 0;
            atomic_compare_exchange_strong(failed, &zero, n < 0 ? errno : EIO);
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

void gb_vlog(gb_log_level level, const char *fmt, va_list ap)
{
    if ((int)level > atomic_load(&g_level))
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    if (g_index >= 0)
        n += snprintf(line + n, sizeof line - (size_t)n, ".%03ldZ %s %s-%d ", ts.tv_nsec / 1000000,
                      level_name(level), g_role, g_index);
    else
        n += snprintf(line + n, sizeof line - (size_t)n, ".%03ldZ %s %s ", ts.tv_nsec / 1000000,
                      level_name(level), g_role);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* long lines are cut, never split */
    line[len++] = '\n';
    if (atomic_load(&g_to_stderr))
        write_all(STDERR_FILENO, line, len, &g_stderr_errno);
    int fd = atomic_load(&g_file_fd);
    if (fd >= 0)
        write_all(fd, line, len, &g_file_errno);
}

void gb_log(gb_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gb_vlog(level, fmt, ap);
    va_end(ap);
}
