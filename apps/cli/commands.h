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
int cmd_pull(int argc, char **argv);
/* Replaces each `--weights hf:ORG/NAME[@REV]` (or --weights=hf:...) in argv by the local path
 * of that model's weights in the hub cache, pulling them first when the cache lacks them (said
 * on stderr): the one place every command's --weights learns hf:. Nothing is done when argv
 * asks for --help. EXIT_OK, or the exit status with the error printed. */
int pull_resolve_weights(int argc, char **argv);
/* The weights file of hub model SPEC (ORG/NAME[@REV], without "hf:") into *path (malloc'd),
 * from the cache or pulled first (said on stderr), as --weights hf:SPEC resolves it (`pagoda
 * serve --models`). EXIT_OK, or the exit status with the error printed. */
int pull_resolve_spec(const char *spec, char **path);
/* The cached model.safetensors of hub repository `repo` (ORG/NAME[@REV]) without a request or a
 * message (malloc'd), or NULL when the cache lacks it. */
char *pull_cached_weights(const char *repo);
int cmd_tokenize(int argc, char **argv);
int cmd_fill_mask(int argc, char **argv);
int cmd_embed_text(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
