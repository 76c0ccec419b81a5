# Warnings on everywhere; sanitizers when asked. Every tandem target links tandem_options.
add_library(tandem_options INTERFACE)
target_compile_options(tandem_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
if(TANDEM_WERROR)
  target_compile_options(tandem_options INTERFACE -Werror)
endif()
if(TANDEM_SANITIZE)
  target_compile_options(tandem_options INTERFACE -fsanitize=${TANDEM_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_link_options(tandem_options INTERFACE -fsanitize=${TANDEM_SANITIZE})
endif()
target_include_directories(tandem_options INTERFACE ${PROJECT_SOURCE_DIR})
