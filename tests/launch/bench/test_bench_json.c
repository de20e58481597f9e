/* tests/launch/bench/test_bench_json.c: the benchmarks' JSON reading (launch/json.c)
 * finds a key by its exact path, not by the first text that looks like it (a strstr reader took the
 * nested "actors" for the top-level one, cut a string at its first escape and missed `"key" :`),
 * and says which key is missing or of another type; and their option parsing (getopt_long through
 * gb_bench_options) keeps order, values, positional arguments and refusals, and a
 * tcp://HOST:PORT option splits into its host and port or is refused whole. */
#include "launch/bench/bench.h"
#include "runtime/streams/endpoint.h"
#include "test.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/gb-test-bench-json-XXXXXX";

/* text into a file of dir; returns its path (static). */
static const char *write_doc(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* A run summary where the strstr reader went wrong: a nested key before the top-level one,
 * an escaped quote in a string, a space before a colon. */
static const char summary[] =
    "{\n"
    "  \"workers\": {\"actors\": 2, \"policies\": 1, \"trainers\": 1},\n"
    "  \"note\": \"\\\"solved\\\": false, said the log\",\n"
    "  \"exit_reason\": \"target \\\"475\\\" reached\",\n"
    "  \"solved\" : true,\n"
    "  \"actors\": 5,\n"
    "  \"env_steps_unsent\": 12,\n"
    "  \"env_steps\": 4000,\n"
    "  \"wall_seconds\": null,\n"
    "  \"resumed\": {\"segment\": 1, \"from_env_steps\": 100}\n"
    "}\n";

static void test_exact_paths(void)
{
    gb_error err = {0};
    json_t *doc = NULL;
    CHECK_OK(gb_json_load(write_doc("summary.json", summary), &doc, &err));
    double v = 0;
    CHECK_OK(gb_json_number(doc, "actors", &v, &err));
    CHECK_NEAR(v, 5, 0); /* the strstr reader: 2, the workers' */
    CHECK_OK(gb_json_number(doc, "workers.actors", &v, &err));
    CHECK_NEAR(v, 2, 0);
    CHECK_OK(gb_json_number(doc, "solved", &v, &err));
    CHECK_NEAR(v, 1, 0); /* the strstr reader: NAN (the space before the colon) */
    CHECK_OK(gb_json_number(doc, "env_steps", &v, &err));
    CHECK_NEAR(v, 4000, 0); /* not env_steps_unsent's 12 */
    CHECK_OK(gb_json_number(doc, "resumed.from_env_steps", &v, &err));
    CHECK_NEAR(v, 100, 0);
    CHECK_OK(gb_json_number(doc, "wall_seconds", &v, &err));
    CHECK(isnan(v)); /* null: not measured */
    char s[64];
    CHECK_OK(gb_json_string(doc, "exit_reason", s, sizeof s, &err));
    CHECK_MSG(strcmp(s, "target \"475\" reached") == 0, "'%s'", s); /* strstr: "target " */
    json_decref(doc);
}

static void test_errors(void)
{
    gb_error err = {0};
    json_t *doc = NULL;
    CHECK_OK(gb_json_load(write_doc("summary.json", summary), &doc, &err));
    double v = 0;
    CHECK_EQ_INT(gb_json_number(doc, "steps", &v, &err), GB_ENOTFOUND);
    CHECK(isnan(v));
    CHECK_MSG(strstr(err.msg, "'steps'") != NULL, "%s", err.msg);
    CHECK_EQ_INT(gb_json_number(doc, "workers.joined", &v, &err), GB_ENOTFOUND);
    CHECK_EQ_INT(gb_json_number(doc, "exit_reason", &v, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "not a number") != NULL, "%s", err.msg);
    CHECK_EQ_INT(gb_json_number(doc, "actors.count", &v, &err), GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "'actors' is not an object") != NULL, "%s", err.msg);
    char s[8];
    CHECK_EQ_INT(gb_json_string(doc, "solved", s, sizeof s, &err), GB_EINVAL);
    CHECK_EQ_INT(s[0], 0);
    CHECK_EQ_INT(gb_json_string(doc, "exit_reason", s, sizeof s, &err), GB_EFULL);
    CHECK_MSG(strcmp(s, "target ") == 0, "'%s'", s);
    json_decref(doc);

    CHECK_EQ_INT(gb_json_load(write_doc("cut.json", "{\"env_steps\": 4000,\n  \"so"), &doc,
                                    &err), GB_ECORRUPT);
    CHECK(doc == NULL);
    CHECK_MSG(strstr(err.msg, "cut.json:2:") != NULL, "%s", err.msg);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    CHECK_EQ_INT(gb_json_load(missing, &doc, &err), GB_ENOTFOUND);
    CHECK_OK(gb_json_load(write_doc("list.json", "[1, 2]"), &doc, &err));
    CHECK_EQ_INT(gb_json_number(doc, "a", &v, &err), GB_EINVAL);
    json_decref(doc);
}

/* ---- options ------------------------------------------------------------------------------ */

typedef struct seen {
    char log[256];
    int refuse; /* refuse this val */
} seen;

static int on_option(void *ctx, int val, const char *arg)
{
    seen *s = ctx;
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof s->log - n, "%s%c=%s", n ? " " : "", val == 1 ? 'P' : val,
             arg ? arg : "-");
    return val == s->refuse ? -1 : 0;
}

static int usages;
static void usage(FILE *out)
{
    (void)out;
    usages++;
}

/* Parses a NULL-terminated command line (its own copy: getopt_long permutes it). */
static int parse(seen *s, int positional, const char *const *args)
{
    static const struct option longs[] = {{"set", required_argument, NULL, 's'},
                                          {"quick", no_argument, NULL, 'q'},
                                          GB_BENCH_OPTION_JSON,
                                          {0}};
    char *argv[16];
    int argc = 0;
    for (; args[argc]; argc++)
        argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    s->log[0] = '\0';
    return gb_bench_options(argc, argv, longs, positional, on_option, s, usage);
}

static void test_options(void)
{
    seen s = {{0}, 0};
    usages = 0;
    CHECK_EQ_INT(parse(&s, 0, (const char *const[]){"x", "--set", "a=1", "--json", "--quick",
                                                    "--set=b=2", NULL}), 0);
    CHECK_MSG(strcmp(s.log, "s=a=1 q=- s=b=2") == 0, "%s", s.log);
    CHECK_EQ_INT(parse(&s, 1, (const char *const[]){"x", "c.yaml", "--quick", "d.yaml", NULL}),
                 0);
    CHECK_MSG(strcmp(s.log, "P=c.yaml q=- P=d.yaml") == 0, "%s", s.log);
    CHECK_EQ_INT(usages, 0);
    CHECK_EQ_INT(parse(&s, 0, (const char *const[]){"x", "--quick", "c.yaml", NULL}), -1);
    CHECK_EQ_INT(parse(&s, 0, (const char *const[]){"x", "--nope", NULL}), -1);
    CHECK_EQ_INT(parse(&s, 0, (const char *const[]){"x", "--set", NULL}), -1);
    CHECK_EQ_INT(usages, 3);
    s.refuse = 'q';
    CHECK_EQ_INT(parse(&s, 0, (const char *const[]){"x", "--quick", "--set", "a", NULL}), -1);
    CHECK_MSG(strcmp(s.log, "q=-") == 0, "%s", s.log); /* stops at the refusal */
    CHECK_EQ_INT(usages, 3); /* the callback says why itself */
}

static void test_parse_tcp(void)
{
    char host[16] = "unchanged";
    int port = -1;
    CHECK_EQ_INT(gb_endpoint_tcp_split("tcp://10.1.2.3:29500", host, sizeof host, &port), 0);
    CHECK_MSG(strcmp(host, "10.1.2.3") == 0 && port == 29500, "%s %d", host, port);
    CHECK_EQ_INT(gb_endpoint_tcp_split("tcp://h:0", host, sizeof host, &port), 0);
    CHECK_MSG(strcmp(host, "h") == 0 && port == 0, "%s %d", host, port);
    const char *bad[] = {"10.1.2.3:5", "tcp://h", "tcp://h:", "tcp://:5", "tcp://h:5x",
                         "tcp://h:65536", "tcp://h:-1", "tcp://a-very-long-host-name:5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(gb_endpoint_tcp_split(bad[i], host, sizeof host, &port) == -1, "%s", bad[i]);
    CHECK_MSG(strcmp(host, "h") == 0 && port == 0, "refused: unchanged (%s %d)", host, port);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_exact_paths);
    TEST_RUN(test_errors);
    TEST_RUN(test_options);
    TEST_RUN(test_parse_tcp);
    gb_bench_remove_tree(dir);
    return test_main_result();
}
