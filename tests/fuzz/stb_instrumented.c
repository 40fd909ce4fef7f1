/* stb_instrumented.c — stb_image's decoders compiled into the image fuzz target itself.
 *
 * libpagoda calls stb_image from Debian's shared libstb (v2.27), which the fuzzer can neither
 * see (no coverage) nor check (no ASan inside it). Compiling the same header's implementation
 * here defines the stbi_* symbols in the executable, which take precedence over the shared
 * library's, so the fuzzer drives the very decoder code the runtime uses, instrumented. */
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
