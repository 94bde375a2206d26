# secwire: the limits part of the security suite (docs/security.md, "Limits"):
# per-uid QPs, MRs, registered bytes, ring descriptors and connections, the
# HELLO timeout, refused peers closed at once, accept(2) EMFILE without a
# busy loop. Each an attack by a second uid (attack.h, attack.cmake).

add_executable(security_limits_test ${CMAKE_CURRENT_LIST_DIR}/limits_test.cc)
target_link_libraries(security_limits_test PRIVATE sroce_security_attack)
add_test(NAME security.limits COMMAND security_limits_test)
set_tests_properties(security.limits PROPERTIES RUN_SERIAL TRUE TIMEOUT 900)
sroce_security_label(security.limits)
