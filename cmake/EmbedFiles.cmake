# coexist_embed_files(<target> <namespace> <files...>)
# Generates a source file that holds each file's text as a string constant,
# so the binary carries its SQL and needs nothing from the source tree at run
# time. The generated table is sorted by file name.
function(coexist_embed_files target namespace)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_embedded.cpp")
  set(files ${ARGN})
  list(SORT files)
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${namespace}
            "-DFILES=${files}" -P "${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake"
    DEPENDS ${files} "${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake"
    COMMENT "Embedding ${namespace} files"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()
