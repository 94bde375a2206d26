/* libsroce-shim.so: completion channels for sroce devices (see shim_hooks.h).
 *
 * sroce-run puts this library in LD_PRELOAD. It defines ibv_create_comp_channel and
 * ibv_destroy_comp_channel with libibverbs' own symbol version (IBVERBS_1.0, see shim.map),
 * so an unchanged program binds to these. For a context that libsroce owns they go to the
 * provider, which returns a channel whose fd is the daemon's event socket (records laid out
 * as the kernel's struct ib_uverbs_comp_event_desc, so libibverbs' ibv_get_cq_event reads
 * them unchanged); for any other device they call the real libibverbs functions. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

#include "shim_hooks.h"

static const struct sroce_shim_hooks* g_hooks;

__attribute__((visibility("default"))) void sroce_shim_register(
    const struct sroce_shim_hooks* hooks) {
  if (hooks != NULL && hooks->version == SROCE_SHIM_HOOKS_VERSION)
    __atomic_store_n(&g_hooks, hooks, __ATOMIC_RELEASE);
}

static const struct sroce_shim_hooks* hooks_for(struct ibv_context* context) {
  const struct sroce_shim_hooks* h = __atomic_load_n(&g_hooks, __ATOMIC_ACQUIRE);
  if (h != NULL && context != NULL && h->owns(context)) return h;
  return NULL;
}

typedef struct ibv_comp_channel* (*create_fn)(struct ibv_context*);
typedef int (*destroy_fn)(struct ibv_comp_channel*);

__attribute__((visibility("default"))) struct ibv_comp_channel* ibv_create_comp_channel(
    struct ibv_context* context) {
  const struct sroce_shim_hooks* h = hooks_for(context);
  if (h != NULL) return h->create_comp_channel(context);
  create_fn real = (create_fn)dlvsym(RTLD_NEXT, "ibv_create_comp_channel", "IBVERBS_1.0");
  if (real == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  return real(context);
}

__attribute__((visibility("default"))) int ibv_destroy_comp_channel(
    struct ibv_comp_channel* channel) {
  const struct sroce_shim_hooks* h = hooks_for(channel != NULL ? channel->context : NULL);
  if (h != NULL) return h->destroy_comp_channel(channel);
  destroy_fn real = (destroy_fn)dlvsym(RTLD_NEXT, "ibv_destroy_comp_channel", "IBVERBS_1.0");
  if (real == NULL) return ENOSYS;
  return real(channel);
}
