#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/backends/emu/report_html_impl.hpp>
