/* tests/workers/server/make_d4rl.c: writes the test D4RL file of serve_util.h (values encode their
 * row) for the Python client's test. Usage: make_d4rl PATH ROWS */
#include "serve_util.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_d4rl PATH ROWS\n");
        return 2;
    }
    if (make_d4rl(argv[1], atoll(argv[2])) != 0) {
        fprintf(stderr, "make_d4rl: cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
