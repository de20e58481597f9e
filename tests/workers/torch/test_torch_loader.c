/* tests/workers/torch/test_torch_loader.c: the gearbox command's loader of the libtorch bridge
 * (workers/torch/loader.c): the built module's table is found and speaks this ABI version; a
 * module of another version, of another table size or without the entry symbol is refused with
 * a message that says so, and nothing of it is called; gb_torch() then ends the process with
 * exit status 1. Each case runs in a child: a process loads the module once.
 * Arguments: the built module, then the bad modules (version, size, nosymbol). */
#include "test.h"
#include "workers/torch/bridge.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Loads path in a child; returns its gb_torch_load code and, in msg, its error message. */
static int load_in_child(const char *path, char *msg, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1000;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        setenv("GEARBOX_TORCH_MODULE", path, 1);
        gb_error err = {0};
        int rc = gb_torch_load(&err);
        if (rc == 0 && (gb_torch()->abi_version != GB_TORCH_ABI_VERSION ||
                        gb_torch()->struct_size != sizeof(gb_torch_api) ||
                        gb_torch_cuda_available() < 0))
            rc = -999;
        if (write(fd[1], &rc, sizeof rc) != (ssize_t)sizeof rc ||
            write(fd[1], err.msg, sizeof err.msg) != (ssize_t)sizeof err.msg)
            _exit(3);
        _exit(0);
    }
    close(fd[1]);
    int rc = -1001;
    char buf[sizeof((gb_error *)0)->msg] = "";
    if (read(fd[0], &rc, sizeof rc) != (ssize_t)sizeof rc ||
        read(fd[0], buf, sizeof buf) != (ssize_t)sizeof buf)
        rc = -1002;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    snprintf(msg, cap, "%s", buf);
    return rc;
}

/* gb_torch() with the module at path, in a child: its exit status. */
static int table_exit_status(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("GEARBOX_TORCH_MODULE", path, 1);
        (void)gb_torch();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *module, *bad_version, *bad_size, *no_symbol;

static void test_built_module_loads(void)
{
    char msg[512];
    int rc = load_in_child(module, msg, sizeof msg);
    CHECK_MSG(rc == 0, "rc %d: %s", rc, msg);
}

static void test_misfits_are_refused(void)
{
    char msg[512];
    CHECK_EQ_INT(load_in_child(bad_version, msg, sizeof msg), GB_EIO);
    CHECK_MSG(strstr(msg, "ABI version") && strstr(msg, "another gearbox build"), "%s", msg);
    CHECK_EQ_INT(load_in_child(bad_size, msg, sizeof msg), GB_EIO);
    CHECK_MSG(strstr(msg, "-byte table"), "%s", msg);
    CHECK_EQ_INT(load_in_child(no_symbol, msg, sizeof msg), GB_EIO);
    CHECK_MSG(strstr(msg, GB_TORCH_ENTRY_SYMBOL), "%s", msg);
    CHECK_EQ_INT(load_in_child("/nonexistent/libgearbox-torch.so", msg, sizeof msg), GB_EIO);
    CHECK_MSG(strstr(msg, "cannot load the libtorch module"), "%s", msg);
}

static void test_table_exits_on_a_misfit(void)
{
    CHECK_EQ_INT(table_exit_status(bad_version), 1);
    CHECK_EQ_INT(table_exit_status("/nonexistent/libgearbox-torch.so"), 1);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODULE BAD_VERSION BAD_SIZE NO_SYMBOL\n", argv[0]);
        return 2;
    }
    module = argv[1];
    bad_version = argv[2];
    bad_size = argv[3];
    no_symbol = argv[4];
    TEST_RUN(test_built_module_loads);
    TEST_RUN(test_misfits_are_refused);
    TEST_RUN(test_table_exits_on_a_misfit);
    return test_main_result();
}
