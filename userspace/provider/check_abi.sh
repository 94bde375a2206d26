#!/bin/sh
# Build-time check of libsroce against the installed libibverbs private ABI.
#   check_abi.sh PROVIDER_SO LIBIBVERBS ABI_PROBE
# 1. every private symbol the provider uses is bound to version IBVERBS_PRIVATE_34 in the
#    provider and exported with that version by the installed library;
# 2. the op-table layout agrees with the library (abi_probe, see abi_probe.cc).
set -eu
so=$1
lib=$(readlink -f "$2")
probe=$3
status=0
# The kernel path (kernel_path.cc) also uses libibverbs' uverbs command helpers.
kernel_syms="ibv_cmd_get_context ibv_cmd_query_device_any ibv_cmd_query_port ibv_cmd_alloc_pd ibv_cmd_dealloc_pd ibv_cmd_reg_mr ibv_cmd_dereg_mr ibv_cmd_rereg_mr ibv_cmd_create_cq ibv_cmd_destroy_cq ibv_cmd_resize_cq ibv_cmd_create_srq ibv_cmd_modify_srq ibv_cmd_query_srq ibv_cmd_destroy_srq ibv_cmd_create_qp_ex ibv_cmd_query_qp ibv_cmd_modify_qp ibv_cmd_destroy_qp ibv_cmd_create_ah ibv_cmd_destroy_ah ibv_cmd_alloc_mw ibv_cmd_dealloc_mw"
for sym in verbs_register_driver_34 _verbs_init_and_alloc_context verbs_uninit_context \
           verbs_set_ops $kernel_syms; do
  if ! readelf --dyn-syms -W "$so" | awk '$7 == "UND" {print $8}' |
       grep -qx "${sym}@IBVERBS_PRIVATE_34"; then
    echo "check_abi: $so does not bind $sym@IBVERBS_PRIVATE_34" >&2
    status=1
  fi
  if ! readelf --dyn-syms -W "$lib" | awk '$7 != "UND" {print $8}' |
       grep -qx "${sym}@@IBVERBS_PRIVATE_34"; then
    echo "check_abi: $lib does not export $sym@@IBVERBS_PRIVATE_34" >&2
    status=1
  fi
done
# No other private symbol may sneak in undeclared.
extra=$(readelf --dyn-syms -W "$so" | awk '$7 == "UND" {print $8}' | grep '@IBVERBS_PRIVATE' |
        grep -v -e '^verbs_register_driver_34@' -e '^_verbs_init_and_alloc_context@' \
                -e '^verbs_uninit_context@' -e '^verbs_set_ops@' $(for k in $kernel_syms; do printf -- "-e ^$k@ "; done) || true)
if [ -n "$extra" ]; then
  echo "check_abi: undeclared private symbols used: $extra" >&2
  status=1
fi
"$probe" >/dev/null || { "$probe" >&2; status=1; }
exit $status
