// The Neuron-Inverter's scalars where people look (TensorBoard's role in the original): one row
// per epoch in a CSV, and a self-contained HTML page with inline SVG plots of the losses and LR.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <ipuml/core/error.hpp>

namespace ipuml::examples {

struct EpochRecord {
  int64_t epoch = 0;
  double train_loss = 0, val_loss = 0, lr = 0, seconds = 0;
  double samples_per_ms_per_ipu_wall = 0, samples_per_ms_per_ipu_simulated = 0;
};

struct TrainingHistory {
  std::vector<EpochRecord> epochs;

  nlohmann::json to_json() const {
    nlohmann::json j = nlohmann::json::array();
    for (auto& e : epochs)
      j.push_back({e.epoch, e.train_loss, e.val_loss, e.lr, e.seconds,
                   e.samples_per_ms_per_ipu_wall, e.samples_per_ms_per_ipu_simulated});
    return j;
  }
  static TrainingHistory from_json(const nlohmann::json& j) {
    TrainingHistory h;
    for (auto& r : j)
      h.epochs.push_back({r.at(0), r.at(1), r.at(2), r.at(3), r.at(4), r.at(5), r.at(6)});
    return h;
  }

  // Written through a temporary renamed over the file, as the checkpoints are.
  void write_csv(const std::string& path) const {
    write_atomically(path, [&](std::ofstream& f) {
      f << "epoch,train_loss,val_loss,lr,epoch_seconds,samples_per_ms_per_ipu_wall,"
           "samples_per_ms_per_ipu_simulated\n";
      char buf[256];
      for (auto& e : epochs) {
        std::snprintf(buf, sizeof buf, "%lld,%.8g,%.8g,%.8g,%.4f,%.6g,%.6g\n",
                      static_cast<long long>(e.epoch), e.train_loss, e.val_loss, e.lr, e.seconds,
                      e.samples_per_ms_per_ipu_wall, e.samples_per_ms_per_ipu_simulated);
        f << buf;
      }
    });
  }

  void write_html(const std::string& path, const std::string& title) const {
    std::vector<double> x, train, val, lr;
    for (auto& e : epochs) {
      x.push_back(static_cast<double>(e.epoch));
      train.push_back(e.train_loss);
      val.push_back(e.val_loss);
      lr.push_back(e.lr);
    }
    write_atomically(path, [&](std::ofstream& f) {
      f << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << title
        << "</title>\n<style>body{font-family:sans-serif;margin:2em}svg{margin:1em 0}"
           "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}</style>"
           "</head><body>\n<h2>"
        << title << "</h2>\n";
      f << svg_plot("loss (MSE, log scale)", x,
                    {{"train", train, "#1f77b4"}, {"val", val, "#d62728"}}, true);
      f << svg_plot("learning rate", x, {{"lr", lr, "#2ca02c"}}, true);
      f << "<table><tr><th>epoch</th><th>train loss</th><th>val loss</th><th>LR</th><th>s</th>"
           "<th>samp/msec/IPU wall</th><th>simulated</th></tr>\n";
      char buf[512];
      for (auto& e : epochs) {
        std::snprintf(buf, sizeof buf,
                      "<tr><td>%lld</td><td>%.5f</td><td>%.5f</td><td>%.3g</td><td>%.1f</td>"
                      "<td>%.3f</td><td>%.2f</td></tr>\n",
                      static_cast<long long>(e.epoch), e.train_loss, e.val_loss, e.lr, e.seconds,
                      e.samples_per_ms_per_ipu_wall, e.samples_per_ms_per_ipu_simulated);
        f << buf;
      }
      f << "</table></body></html>\n";
    });
  }

 private:
  struct Series {
    std::string name;
    std::vector<double> y;
    std::string color;
  };

  template <typename Fn>
  static void write_atomically(const std::string& path, Fn&& fn) {
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      IPUML_CHECK(f.good(), "cannot write ", tmp);
      fn(f);
      IPUML_CHECK(f.good(), "cannot write ", tmp);
    }
    std::filesystem::rename(tmp, path);
  }

  // A line plot, 640 x 260, with axes labels at the ends of the ranges.
  static std::string svg_plot(const std::string& title, const std::vector<double>& x,
                              const std::vector<Series>& series, bool log_y) {
    const double w = 640, h = 260, l = 70, r = 20, t = 30, b = 40;
    double x0 = x.empty() ? 0 : x.front(), x1 = x.empty() ? 1 : x.back();
    if (x1 <= x0) x1 = x0 + 1;
    double y0 = INFINITY, y1 = -INFINITY;
    auto tr = [&](double v) { return log_y ? std::log10(std::max(v, 1e-30)) : v; };
    for (auto& s : series)
      for (double v : s.y) {
        y0 = std::min(y0, tr(v));
        y1 = std::max(y1, tr(v));
      }
    if (!(y1 > y0)) {
      y0 = std::isfinite(y0) ? y0 - 1 : 0;
      y1 = y0 + 2;
    }
    auto px = [&](double v) { return l + (v - x0) / (x1 - x0) * (w - l - r); };
    auto py = [&](double v) { return t + (y1 - tr(v)) / (y1 - y0) * (h - t - b); };
    auto label = [&](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", log_y ? std::pow(10.0, v) : v);
      return std::string(buf);
    };
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"260\">\n";
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%g\" y=\"18\" font-size=\"14\">%s</text>\n"
                  "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                  "stroke=\"#888\"/>\n"
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%s</text>\n"
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%s</text>\n"
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\">epoch %g</text>\n"
                  "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
                  l, title.c_str(), l, t, w - l - r, h - t - b, l - 4, t + 10, label(y1).c_str(),
                  l - 4, h - b, label(y0).c_str(), l, h - b + 16, x0, w - r, h - b + 16, x1);
    s += buf;
    double legend = l + 10;
    for (auto& ser : series) {
      std::string pts;
      for (size_t i = 0; i < ser.y.size() && i < x.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(x[i]), py(ser.y[i]));
        pts += buf;
      }
      s += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + ser.color + "\" points=\"" +
           pts + "\"/>\n";
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%g\" y=\"%g\" font-size=\"12\" fill=\"%s\">%s</text>\n", legend,
                    t + 16, ser.color.c_str(), ser.name.c_str());
      s += buf;
      legend += 60;
    }
    return s + "</svg>\n";
  }
};

}  // namespace ipuml::examples
