// cli.cpp - main: the process set-up, then the command line (app/command_line.hpp).
#include "app/cli/command_line.hpp"
#include "engine/paths.hpp"
#include "engine/session.hpp"
#include "io/image_io.hpp"

int main(int argc, char** argv) {
  if (argc > 0 && argv[0]) attnmap::set_program_path(argv[0]);  // --json/--manifest never replace the program
  attnmap::install_interrupt_cleanup();  // Ctrl-C or a kill leaves no temporary file beside the outputs
  attnmap::use_one_malloc_arena_under_address_limit();  // ulimit -v: room for the libraries' thread stacks
  attnmap::keep_freed_memory_for_the_next_image();  // no ulimit -v: no mmap / munmap per image buffer
  return attnmap::run_command_line(std::vector<std::string>(argv, argv + argc));
}
