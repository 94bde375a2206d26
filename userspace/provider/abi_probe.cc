// Checks rdma_private.h against the installed libibverbs: for every slot of our
// verbs_context_ops, verbs_set_ops() must copy exactly that slot into its private op table
// (at one constant offset for all 76 slots) and, for the ops libibverbs mirrors into the
// public ibv_context_ops / verbs_context, into the public field we expect. A member in the
// wrong place, a missing or an extra one shows up as a moved offset or a wrong mirror.
// Exit status 0 = layout agrees; prints what disagrees otherwise.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cstddef>

#include "rdma_private.h"

namespace {

constexpr size_t kPrivBytes = 8192;  // far larger than libibverbs' verbs_ex_private

void* sentinel(size_t slot) { return reinterpret_cast<void*>(0x5ec0000000ull + slot * 16); }

struct Mirror {
  size_t slot;
  size_t public_offset;  // in struct verbs_context
  const char* name;
};

#define SLOT(name) (offsetof(verbs_context_ops, name) / sizeof(void*))
#define VCTX(field) offsetof(verbs_context, field)
#define CTXOP(field) \
  (offsetof(verbs_context, context) + offsetof(ibv_context, ops) + offsetof(ibv_context_ops, field))

const Mirror kMirrors[] = {
    {SLOT(poll_cq), CTXOP(poll_cq), "poll_cq"},
    {SLOT(post_send), CTXOP(post_send), "post_send"},
    {SLOT(post_recv), CTXOP(post_recv), "post_recv"},
    {SLOT(post_srq_recv), CTXOP(post_srq_recv), "post_srq_recv"},
    {SLOT(req_notify_cq), CTXOP(req_notify_cq), "req_notify_cq"},
    {SLOT(alloc_pd), CTXOP(_compat_alloc_pd), "alloc_pd"},
    {SLOT(reg_mr), CTXOP(_compat_reg_mr), "reg_mr"},
    {SLOT(create_cq), CTXOP(_compat_create_cq), "create_cq"},
    {SLOT(create_qp), CTXOP(_compat_create_qp), "create_qp"},
    {SLOT(modify_qp), CTXOP(_compat_modify_qp), "modify_qp"},
    {SLOT(destroy_qp), CTXOP(_compat_destroy_qp), "destroy_qp"},
    {SLOT(create_srq), CTXOP(_compat_create_srq), "create_srq"},
    {SLOT(create_ah), CTXOP(_compat_create_ah), "create_ah"},
    {SLOT(cq_event), CTXOP(_compat_cq_event), "cq_event"},
    {SLOT(async_event), CTXOP(_compat_async_event), "async_event"},
    {SLOT(query_device_ex), VCTX(query_device_ex), "query_device_ex"},
    {SLOT(create_qp_ex), VCTX(create_qp_ex), "create_qp_ex"},
    {SLOT(create_srq_ex), VCTX(create_srq_ex), "create_srq_ex"},
    {SLOT(open_xrcd), VCTX(open_xrcd), "open_xrcd"},
    {SLOT(close_xrcd), VCTX(close_xrcd), "close_xrcd"},
    {SLOT(advise_mr), VCTX(advise_mr), "advise_mr"},
    {SLOT(modify_cq), VCTX(modify_cq), "modify_cq"},
    {SLOT(read_counters), VCTX(read_counters), "read_counters"},
    {SLOT(create_flow), VCTX(ibv_create_flow), "create_flow"},
    {SLOT(destroy_flow), VCTX(ibv_destroy_flow), "destroy_flow"},
};

}  // namespace

int main() {
  int failures = 0;
  long priv_base = -1;
  for (size_t slot = 0; slot < kVerbsContextOpsSlots; ++slot) {
    verbs_context_ops ops{};
    reinterpret_cast<void**>(&ops)[slot] = sentinel(slot);
    auto* priv = static_cast<unsigned char*>(calloc(1, kPrivBytes));
    verbs_context vctx{};
    verbs_context before{};
    vctx.priv = reinterpret_cast<verbs_ex_private*>(priv);
    before = vctx;
    verbs_set_ops(&vctx, &ops);

    // The private copy: exactly one occurrence, at base + slot * 8.
    long found = -1;
    int hits = 0;
    void* want = sentinel(slot);
    for (size_t off = 0; off + sizeof(void*) <= kPrivBytes; off += sizeof(void*)) {
      void* v;
      memcpy(&v, priv + off, sizeof(v));
      if (v == want) {
        found = static_cast<long>(off);
        ++hits;
      }
    }
    if (hits != 1) {
      printf("slot %zu: found %d copies in the private table\n", slot, hits);
      ++failures;
    } else {
      long base = found - static_cast<long>(slot * sizeof(void*));
      if (priv_base < 0) priv_base = base;
      if (base != priv_base) {
        printf("slot %zu: private copy at base %ld, other slots at %ld\n", slot, base, priv_base);
        ++failures;
      }
    }

    // The public mirrors: the expected field, and nothing else in verbs_context.
    const Mirror* mirror = nullptr;
    for (const Mirror& m : kMirrors)
      if (m.slot == slot) mirror = &m;
    auto* now = reinterpret_cast<unsigned char*>(&vctx);
    auto* old = reinterpret_cast<unsigned char*>(&before);
    for (size_t off = 0; off + sizeof(void*) <= sizeof(verbs_context); off += sizeof(void*)) {
      if (memcmp(now + off, old + off, sizeof(void*)) == 0) continue;
      void* v;
      memcpy(&v, now + off, sizeof(v));
      if (mirror != nullptr && off == mirror->public_offset && v == want) continue;
      if (v != want) continue;  // libibverbs may set fields of its own (none expected)
      if (mirror != nullptr) {
        printf("slot %zu (%s): mirrored at offset %zu, expected %zu\n", slot, mirror->name, off,
               mirror->public_offset);
        ++failures;
      }
    }
    if (mirror != nullptr) {
      void* v;
      memcpy(&v, now + mirror->public_offset, sizeof(v));
      if (v != want) {
        printf("slot %zu (%s): public field not set\n", slot, mirror->name);
        ++failures;
      }
    }
    free(priv);
  }
  if (failures == 0) {
    printf("verbs_context_ops: all %zu slots at the expected places (private table at +%ld)\n",
           kVerbsContextOpsSlots, priv_base);
    return 0;
  }
  printf("verbs_context_ops: %d disagreements with the installed libibverbs\n", failures);
  return 1;
}
