# The hostile client (docs/security.md, "The hostile client"): a second uid sends a
# live sroced malformed control messages and ring contents; a victim of another uid
# keeps its bytes and the daemon keeps serving.
find_package(nlohmann_json REQUIRED)
add_executable(sroce_hostile
  ${CMAKE_CURRENT_LIST_DIR}/hostile.cc
  ${CMAKE_CURRENT_LIST_DIR}/hostile_attacks.cc
  ${CMAKE_SOURCE_DIR}/tests/daemon/abi_client.cc
  ${CMAKE_SOURCE_DIR}/tests/daemon/harness.cc)
target_include_directories(sroce_hostile PRIVATE
  ${CMAKE_SOURCE_DIR}/userspace/abi ${CMAKE_SOURCE_DIR}/tests/daemon ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(sroce_hostile PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(sroce_hostile PRIVATE SROCED_BIN="$<TARGET_FILE:sroced>")
add_dependencies(sroce_hostile sroced)
add_test(NAME security.hostile COMMAND sroce_hostile)
# The exit code decides (77: skipped when not root); a FAIL line or a sanitizer report
# fails it too.
set_tests_properties(security.hostile PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
  FAIL_REGULAR_EXPRESSION "(^|\n)FAIL |ERROR: AddressSanitizer|runtime error:")
sroce_security_label(security.hostile)
