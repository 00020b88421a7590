# One room for the queue's SQL: C++ that names coexist.queue or coexist.runs
# lives in the queue store (schema/queue_store*.h/.cpp), so the queue's rules are
# read and changed in one place. Migrations (.sql) and tests may name them.
#   cmake -DSOURCE_DIR=<repo> -P tests/one_queue_store.cmake
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/*.h ${SOURCE_DIR}/*.cpp)
set(offenders "")
foreach(path IN LISTS sources)
  if(path MATCHES "^(build[^/]*|tests|\\.[^/]*)/" OR path MATCHES "^schema/queue_store")
    continue()
  endif()
  file(STRINGS ${SOURCE_DIR}/${path} hits REGEX "coexist\\.(queue|runs)([^_a-z]|$)")
  if(hits)
    list(APPEND offenders ${path})
  endif()
endforeach()
if(offenders)
  list(JOIN offenders "\n  " listed)
  message(FATAL_ERROR "coexist.queue or coexist.runs named outside the queue store "
                      "(schema/queue_store*.h/.cpp):\n  ${listed}\n"
                      "Add a function to the queue store and call it instead.")
endif()
