/* bench_cmd.h — what the CLI sees of apps/bench: the `pagoda bench` command (bench.c), which
 * apps/cli/pagoda.c dispatches. The bench itself builds on apps/common only, never on
 * apps/cli. */
#ifndef PAGODA_BENCH_CMD_H
#define PAGODA_BENCH_CMD_H

/* pagoda bench [options] ITEM|SUITE...: returns the exit status. */
int cmd_bench(int argc, char **argv);

#endif
