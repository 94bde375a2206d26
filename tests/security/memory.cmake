# secmem (docs/security.md, "Memory"): every context reaches only the address space it had at
# HELLO, MRs belong to their context, DEREG_MR / REREG_MR fence in-flight work. One test per
# hole, each an attack that must fail.

# The fence, deterministic on two engines back to back.
add_executable(sroce_secmem_fence memory_fence.cc)
target_include_directories(sroce_secmem_fence PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit/engine)
target_link_libraries(sroce_secmem_fence PRIVATE sroce_engine sroce_catch_main)
add_test(NAME security_memory_fence COMMAND sroce_secmem_fence)

# The setuid victim of the exec attack: no sanitizer runtime in a setuid program.
add_executable(sroce_secmem_victim memory_victim.cc)
target_compile_options(sroce_secmem_victim PRIVATE -fno-sanitize=all)
target_link_options(sroce_secmem_victim PRIVATE -fno-sanitize=all)

# The attacks on live daemons, as a second uid.
find_package(nlohmann_json REQUIRED)
add_executable(sroce_secmem_attack memory_attack.cc
  ${CMAKE_SOURCE_DIR}/tests/daemon/abi_client.cc ${CMAKE_SOURCE_DIR}/tests/daemon/harness.cc)
target_include_directories(sroce_secmem_attack PRIVATE
  ${CMAKE_SOURCE_DIR}/tests/daemon ${CMAKE_SOURCE_DIR}/userspace/abi)
target_link_libraries(sroce_secmem_attack PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(sroce_secmem_attack PRIVATE SROCED_BIN="$<TARGET_FILE:sroced>")
add_dependencies(sroce_secmem_attack sroced sroce_secmem_victim)
add_test(NAME security_memory_exec COMMAND sroce_secmem_attack exec $<TARGET_FILE:sroce_secmem_victim>)
add_test(NAME security_memory_exit COMMAND sroce_secmem_attack exit)
add_test(NAME security_memory_huge_range COMMAND sroce_secmem_attack huge)
add_test(NAME security_memory_hello_fd COMMAND sroce_secmem_attack hello)
set_tests_properties(security_memory_exec security_memory_exit security_memory_huge_range
  security_memory_hello_fd PROPERTIES RUN_SERIAL TRUE TIMEOUT 240)

sroce_security_label(security_memory_fence security_memory_exec security_memory_exit
  security_memory_huge_range security_memory_hello_fd)
