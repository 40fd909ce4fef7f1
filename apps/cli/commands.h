/* commands.h — the commands of the `pagoda` CLI, one per file in apps/cli (pagoda.c dispatches
 * them); `pagoda bench` is apps/bench's (bench_cmd.h). Each returns the exit status. */
#ifndef PAGODA_COMMANDS_H
#define PAGODA_COMMANDS_H

#include "app.h"

int cmd_devices(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_vit(int argc, char **argv);
int cmd_nonlocal(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_similar(int argc, char **argv);
int cmd_gat(int argc, char **argv);
int cmd_memnet(int argc, char **argv);
int cmd_detect(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);

#endif
