# secwire: the wire part of the security suite (docs/security.md, "The wire",
# "Keys"): STATS / sroce qps as a second uid, the privileged Q_Key, random
# keys; live, a forged ACK/NAK from a third address across namespaces. The forged-packet attacks on the engine's peer check are Catch2 unit
# tests in tests/unit/engine/test_peer_checks.cc (engine.*, label unit) and
# run here too under the security label (security.wire.engine).
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)

add_executable(security_wire_test ${CMAKE_CURRENT_LIST_DIR}/wire_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/../../tools/sroce/cmd_daemon.cc)
target_include_directories(security_wire_test PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../../userspace/engine/include
  ${CMAKE_CURRENT_LIST_DIR}/../../tools/sroce)
target_include_directories(security_wire_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../..)
target_link_libraries(security_wire_test PRIVATE sroce_security_attack sroce_proto fmt::fmt CLI11::CLI11)
add_test(NAME security.wire COMMAND security_wire_test)
add_test(NAME security.wire.engine COMMAND unit_engine "[security]")
set_tests_properties(security.wire PROPERTIES RUN_SERIAL TRUE TIMEOUT 600)
sroce_security_label(security.wire security.wire.engine)
