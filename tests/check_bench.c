/* check_bench.c — runs a `pagoda bench` command line and checks its exit status and, unless
 * told otherwise, that its stdout is a bench JSON document with the documented fields
 * (docs/bench-json.md).
 *
 *   check_bench [--exit N] [--no-json] [--peak] PAGODA ARGS...
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "check_bench: %s\n", what);
    return 1;
}

static int check_doc(const json_t *doc, int want_peak)
{
    const char *top[] = {"schema", "pagoda_version", "git", "date"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!json_is_string(json_object_get(doc, top[i])))
            return fail(top[i]);
    const char *date = json_string_value(json_object_get(doc, "date"));
    if (strlen(date) != 20 || date[10] != 'T' || date[19] != 'Z')
        return fail("date is not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ)");
    json_t *host = json_object_get(doc, "host");
    if (!json_is_string(json_object_get(host, "hostname")) ||
        !json_is_string(json_object_get(host, "cpu_model")) ||
        !json_is_integer(json_object_get(host, "cores")))
        return fail("host {hostname, cpu_model, cores}");
    json_t *runs = json_object_get(doc, "runs");
    if (!json_is_array(runs) || json_array_size(runs) == 0)
        return fail("runs");
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        if (!json_is_string(json_object_get(json_object_get(run, "device"), "name")))
            return fail("runs[].device.name");
        if (!json_is_string(json_object_get(run, "driver")))
            return fail("runs[].driver");
        /* which parameter entry ran: the database's, the tuner's store's or the options' */
        const char *params = json_string_value(json_object_get(run, "params"));
        if (!params || (strncmp(params, "db:", 3) && strncmp(params, "tuned:", 6) &&
                        strcmp(params, "options")))
            return fail("runs[].params (db:<entry>, tuned:<store key> or options)");
        json_t *pk = json_object_get(run, "peak");
        if (want_peak && (!json_is_number(json_object_get(pk, "gflops")) ||
                          !json_is_number(json_object_get(pk, "gbs")) ||
                          json_number_value(json_object_get(pk, "gflops")) <= 0 ||
                          json_number_value(json_object_get(pk, "gbs")) <= 0))
            return fail("runs[].peak {gflops, gbs} > 0");
        json_t *results = json_object_get(run, "results");
        if (!json_is_array(results) || json_array_size(results) == 0)
            return fail("runs[].results");
        size_t k;
        json_t *r;
        json_array_foreach(results, k, r)
        {
            const char *keys[] = {"median_ms", "p90_ms", "min_ms", "compile_ms"};
            if (!json_is_string(json_object_get(r, "item")) ||
                !json_is_string(json_object_get(r, "spec")) ||
                !json_is_object(json_object_get(r, "params")))
                return fail("results[] {item, spec, params}");
            for (size_t j = 0; j < 4; j++)
                if (!json_is_number(json_object_get(r, keys[j])))
                    return fail(keys[j]);
            double med = json_number_value(json_object_get(r, "median_ms"));
            double p90 = json_number_value(json_object_get(r, "p90_ms"));
            double mn = json_number_value(json_object_get(r, "min_ms"));
            if (!(mn <= med && med <= p90 && mn > 0))
                return fail("min <= median <= p90, min > 0");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int want_exit = 0, json = 1, peak = 0, a = 1;
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strcmp(argv[a], "--exit") && a + 1 < argc)
            want_exit = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--no-json"))
            json = 0;
        else if (!strcmp(argv[a], "--peak"))
            peak = 1;
        else
            return fail("usage: check_bench [--exit N] [--no-json] [--peak] PAGODA ARGS...");
    }
    if (a >= argc)
        return fail("no command");
    int fds[2];
    if (pipe(fds))
        return fail("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[a], argv + a);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    ssize_t got;
    while (out && (got = read(fds[0], out + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (len + 1 == cap)
            out = realloc(out, cap *= 2);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!out)
        return fail("out of memory");
    out[len] = 0;
    fputs(out, stderr);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want_exit) {
        fprintf(stderr, "check_bench: exit status %d, wanted %d\n",
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, want_exit);
        return 1;
    }
    int rc = 0;
    if (json) {
        json_error_t je;
        json_t *doc = json_loads(out, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
            fprintf(stderr, "check_bench: stdout is not JSON: line %d: %s\n", je.line, je.text);
            rc = 1;
        } else {
            rc = check_doc(doc, peak);
            json_decref(doc);
        }
    }
    free(out);
    return rc;
}
