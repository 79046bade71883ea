# ctest driver: configure Folio as if none of the service's libraries were installed (each lookup hidden
# with CMAKE_DISABLE_FIND_PACKAGE_<Name>, service/dependencies.cmake), then check that the configure
# succeeds, names the Debian package of every missing library, leaves the service out, and that engine
# tests build and pass. Arguments: FOLIO_SOURCE, WORK, CXX, BUILD_TYPE, TRACES, LAUNCHER (may be empty).
file(REMOVE_RECURSE ${WORK})
set(hidden FCGI SQLite3 Libpq OpenSSL CURL RapidJSON Systemd Hiredis)
set(packages libfcgi-dev libsqlite3-dev libpq-dev libssl-dev libcurl4-openssl-dev rapidjson-dev libsystemd-dev libhiredis-dev)
set(engine_tests id_test version_test)

set(configure ${CMAKE_COMMAND} -S ${FOLIO_SOURCE} -B ${WORK} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DFOLIO_TRACES_DIR=${TRACES})
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
foreach(name IN LISTS hidden)
  list(APPEND configure -DCMAKE_DISABLE_FIND_PACKAGE_${name}=ON)
endforeach()
execute_process(COMMAND ${configure} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring without the service's libraries failed (${rc}):\n${out}\n${err}")
endif()
foreach(package IN LISTS packages)
  string(FIND "${err}" "${package}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the configure output does not name ${package}:\n${err}")
  endif()
endforeach()
if(EXISTS ${WORK}/service OR EXISTS ${WORK}/tools)
  message(FATAL_ERROR "the service was configured although its libraries are missing")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} --target ${engine_tests}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building ${engine_tests} without the service failed (${rc}):\n${out}\n${err}")
endif()
foreach(test IN LISTS engine_tests)
  execute_process(COMMAND ${WORK}/tests/${test} --gtest_brief=1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${test} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${test}: ${out}")
endforeach()
