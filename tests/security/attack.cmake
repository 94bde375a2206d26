# The attacker's runner shared by the security suite's parts (attack.h): a
# Catch2 main that also runs one named attack when started as
# `<test> --attack NAME ...` under a second uid (setpriv), plus the daemon
# test client and harness. Sorted before the parts that link it.
find_package(Catch2 REQUIRED)
find_package(nlohmann_json REQUIRED)
add_library(sroce_security_attack STATIC
  ${CMAKE_CURRENT_LIST_DIR}/attack_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/../daemon/abi_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/../daemon/harness.cc)
target_include_directories(sroce_security_attack PUBLIC
  ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_CURRENT_LIST_DIR}/../daemon
  ${CMAKE_CURRENT_LIST_DIR}/../../userspace/abi)
target_link_libraries(sroce_security_attack PUBLIC Catch2::Catch2 nlohmann_json::nlohmann_json)
target_compile_options(sroce_security_attack PRIVATE -Wno-maybe-uninitialized)  # Catch2's own code
target_compile_definitions(sroce_security_attack PUBLIC SROCED_BIN="$<TARGET_FILE:sroced>")
add_dependencies(sroce_security_attack sroced)
