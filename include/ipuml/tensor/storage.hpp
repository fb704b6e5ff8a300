// Host storage shared by a tensor and its views: one 64-byte-aligned allocation.
// Allocation goes through a size-bucketed cache so steady-state training allocates nothing new.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

namespace ipuml {

// Keeps freed blocks by exact size and hands them out again; bounded so it cannot hoard memory.
class HostAllocator {
 public:
  static HostAllocator& instance() {
    static HostAllocator* a = new HostAllocator();  // never destroyed: storages may outlive main
    return *a;
  }
  void* allocate(size_t nbytes) {
    if (nbytes == 0) nbytes = 64;
    nbytes = (nbytes + 63) & ~size_t{63};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(nbytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= nbytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, nbytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p, size_t nbytes) {
    if (nbytes == 0) nbytes = 64;
    nbytes = (nbytes + 63) & ~size_t{63};
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + nbytes <= limit_) {
      free_[nbytes].push_back(p);
      cached_ += nbytes;
    } else {
      std::free(p);
    }
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [n, v] : free_)
      for (void* p : v) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t limit_ = size_t{1} << 30;
};

class Storage {
 public:
  explicit Storage(size_t nbytes)
      : nbytes_(nbytes), data_(HostAllocator::instance().allocate(nbytes)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() { HostAllocator::instance().release(data_, nbytes_); }
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  size_t nbytes_;
  void* data_;
};

}  // namespace ipuml
