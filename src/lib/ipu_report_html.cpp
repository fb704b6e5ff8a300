#include <ipuml/backends/ipu/report_html.hpp>
#include <ipuml/backends/ipu/report_html_impl.hpp>
