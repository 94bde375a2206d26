/* The hand-shake between libsroce (the provider) and libsroce-shim.so (LD_PRELOADed by
 * sroce-run). Completion channels are the one verb libibverbs implements by itself with a
 * uverbs write() on the device node, which has no kernel behind it under sroce; the shim
 * interposes ibv_create_comp_channel/ibv_destroy_comp_channel and asks the provider, which
 * registers these hooks when it is loaded. C, so the shim stays a tiny C file. */
#ifndef SROCE_PROVIDER_SHIM_HOOKS_H
#define SROCE_PROVIDER_SHIM_HOOKS_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SROCE_SHIM_HOOKS_VERSION 1

struct sroce_shim_hooks {
  uint32_t version; /* SROCE_SHIM_HOOKS_VERSION */
  /* Non-zero if `context` was opened through libsroce. */
  int (*owns)(struct ibv_context* context);
  /* Same contract as the verbs they replace: NULL/errno, or 0/errno value. */
  struct ibv_comp_channel* (*create_comp_channel)(struct ibv_context* context);
  int (*destroy_comp_channel)(struct ibv_comp_channel* channel);
};

/* Exported by the shim; the provider finds it with dlsym(RTLD_DEFAULT, ...). */
typedef void (*sroce_shim_register_fn)(const struct sroce_shim_hooks* hooks);
#define SROCE_SHIM_REGISTER_SYMBOL "sroce_shim_register"

#ifdef __cplusplus
}
#endif

#endif /* SROCE_PROVIDER_SHIM_HOOKS_H */
