# ctest driver: install Folio into a scratch prefix, then configure, build and run the consumer
# against it with find_package(folio). Arguments: FOLIO_SOURCE, WORK, CXX.
file(REMOVE_RECURSE ${WORK})
foreach(step
    "${CMAKE_COMMAND};-S;${FOLIO_SOURCE};-B;${WORK}/folio-build;-DCMAKE_CXX_COMPILER=${CXX};-DFOLIO_BUILD_TESTS=OFF;-DFOLIO_BUILD_BENCH=OFF;-DFOLIO_BUILD_SERVICE=OFF;-DCMAKE_INSTALL_PREFIX=${WORK}/prefix"
    "${CMAKE_COMMAND};--install;${WORK}/folio-build"
    "${CMAKE_COMMAND};-S;${FOLIO_SOURCE}/tests/consumer;-B;${WORK}/consumer-build;-DCMAKE_CXX_COMPILER=${CXX};-DCMAKE_PREFIX_PATH=${WORK}/prefix"
    "${CMAKE_COMMAND};--build;${WORK}/consumer-build"
    "${WORK}/consumer-build/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer step failed (${rc}): ${step}\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "consumer: ${out}")
