# tandem_embed(<target> <symbol> <file>...): compiles the files into <target> as one table of
# {name, text} pairs, reachable through `tandem::embedded::<symbol>()`. Used for kernels and data files
# (bucket tables) so the binary needs nothing from the source tree at run time.
set(TANDEM_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake)
function(tandem_embed target symbol)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_${symbol}.cpp)
  set(files ${ARGN})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} "-DFILES=${files}" -P ${TANDEM_EMBED_SCRIPT}
    DEPENDS ${files} ${TANDEM_EMBED_SCRIPT}
    COMMENT "Embedding ${symbol}" VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
