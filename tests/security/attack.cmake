# The attacker's side shared by the security suite's parts (attack.h): the
# test binary run again under a second uid (setpriv) runs one named attack
# from a hidden test case; plus the daemon test client and harness. Sorted
# before the parts that link it.
find_package(Catch2 REQUIRED)
find_package(nlohmann_json REQUIRED)
add_library(sroce_security_attack STATIC
  ${CMAKE_CURRENT_LIST_DIR}/attack.cc
  ${CMAKE_CURRENT_LIST_DIR}/../daemon/abi_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/../daemon/harness.cc)
target_include_directories(sroce_security_attack PUBLIC
  ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_CURRENT_LIST_DIR}/../daemon
  ${CMAKE_CURRENT_LIST_DIR}/../../userspace/abi)
target_link_libraries(sroce_security_attack PUBLIC sroce_catch_main nlohmann_json::nlohmann_json)
target_compile_definitions(sroce_security_attack PUBLIC SROCED_BIN="$<TARGET_FILE:sroced>")
add_dependencies(sroce_security_attack sroced)
