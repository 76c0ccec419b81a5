# Warnings on everywhere; sanitizers when asked. Every tandem target links tandem_options.
# Not -Wnull-dereference: GCC 12 reports it at -O2 inside inlined libstdc++, Asio and CLI11 code.
add_library(tandem_options INTERFACE)
target_compile_options(tandem_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough)
if(TANDEM_WERROR)
  target_compile_options(tandem_options INTERFACE -Werror)
endif()
if(TANDEM_SANITIZE)
  target_compile_options(tandem_options INTERFACE -fsanitize=${TANDEM_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_link_options(tandem_options INTERFACE -fsanitize=${TANDEM_SANITIZE})
endif()
target_include_directories(tandem_options INTERFACE ${PROJECT_SOURCE_DIR})
