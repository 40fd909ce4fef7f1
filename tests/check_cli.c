/* check_cli.c — runs a `pagoda` command line and checks its exit status and that its output
 * (stdout and stderr read together) contains given texts; can first write the .npy input the
 * command reads.
 *
 *   check_cli [--exit N] [--stderr TEXT]... [--stdout TEXT]... [--npy PATH VALUE B C H W]
 *             PAGODA ARGS...
 *
 * --npy writes a float32 tensor [B, C, H, W] with every element VALUE (strtof: "nan", "inf",
 * "3e38" ...), so that tests need no committed file for a hostile input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "check_cli: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static int write_npy(const char *path, float value, const long dims[4])
{
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld, "
                     "%ld, %ld, %ld), }",
                     dims[0], dims[1], dims[2], dims[3]);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned short hl = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fprintf(f, "%s%*s\n", hdr, pad, "");
    long count = dims[0] * dims[1] * dims[2] * dims[3];
    for (long i = 0; i < count; i++)
        fwrite(&value, sizeof value, 1, f); /* little-endian hosts only, as the tests run */
    return fclose(f);
}

/* Runs argv with its stdout and stderr into one buffer (*err, malloc'd); the exit status or
 * -1. */
static int run(char **argv, char **err)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)got;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    close(fds[0]);
    if (buf)
        buf[len] = '\0';
    *err = buf;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    int want_exit = 0, a = 1, nwant = 0;
    const char *want[16];
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strcmp(argv[a], "--exit") && a + 1 < argc) {
            want_exit = atoi(argv[++a]);
        } else if ((!strcmp(argv[a], "--stderr") || !strcmp(argv[a], "--stdout")) && a + 1 < argc &&
                   nwant < 16) {
            want[nwant++] = argv[++a];
        } else if (!strcmp(argv[a], "--npy") && a + 6 < argc) {
            long dims[4];
            for (int d = 0; d < 4; d++)
                dims[d] = atol(argv[a + 3 + d]);
            if (write_npy(argv[a + 1], strtof(argv[a + 2], NULL), dims))
                return fail("cannot write", argv[a + 1]);
            a += 6;
        } else {
            return fail("usage: check_cli [--exit N] [--stderr TEXT]... [--stdout TEXT]... [--npy "
                        "PATH VALUE B C H W] PAGODA ARGS...",
                        NULL);
        }
    }
    if (a >= argc)
        return fail("no command", NULL);
    char *err = NULL;
    int rc = run(argv + a, &err);
    fputs(err ? err : "", stderr);
    int bad = 0;
    if (rc != want_exit) {
        fprintf(stderr, "check_cli: exit status %d, expected %d\n", rc, want_exit);
        bad = 1;
    }
    for (int i = 0; i < nwant; i++)
        if (!err || !strstr(err, want[i])) {
            fprintf(stderr, "check_cli: '%s' not in the output\n", want[i]);
            bad = 1;
        }
    free(err);
    return bad;
}
