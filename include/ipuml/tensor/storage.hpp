// Storage shared by a tensor and its views: one 64-byte-aligned allocation and its device.
// Allocation goes through a size-bucketed cache so steady-state training allocates nothing new.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <ipuml/core/device.hpp>

namespace ipuml {

// Counters of the host allocator since the process started (PyTorch's memory_stats, in small).
struct HostAllocatorStats {
  size_t system_allocations = 0;  // blocks that had to come from the system (cache misses)
  size_t cache_hits = 0;          // blocks handed out again from the cache
  size_t cached_bytes = 0;        // bytes held in the cache now, free for reuse
};

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
        ++hits_;
        return p;
      }
      ++misses_;
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
  HostAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {misses_, hits_, cached_};
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t misses_ = 0, hits_ = 0;
  size_t limit_ = size_t{1} << 30;
};

// Every device of this build keeps its bytes in host memory (the emulators run on the host), so
// the device is a tag that routes ops to its backend's kernel table; .to(device) still copies,
// as it would for a device with memory of its own.
class Storage {
 public:
  // On the meta device nothing is allocated: data() is null and the bytes are only counted.
  explicit Storage(size_t nbytes, Device device = Device())
      : nbytes_(nbytes),
        data_(device.is_meta() ? nullptr : HostAllocator::instance().allocate(nbytes)),
        borrowed_(device.is_meta()),
        device_(device) {}
  // Memory owned elsewhere (ipuml::from_xtensor): never freed here; `owner` (may be null) is
  // kept alive as long as the storage is, for callers that hand their container over. On the
  // CPU: the memory is the host's.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> owner)
      : nbytes_(nbytes), data_(data), borrowed_(true), owner_(std::move(owner)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (!borrowed_) HostAllocator::instance().release(data_, nbytes_);
  }
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  bool borrowed() const { return borrowed_; }
  Device device() const { return device_; }

 private:
  size_t nbytes_;
  void* data_;
  bool borrowed_ = false;
  std::shared_ptr<void> owner_;
  Device device_;
};

}  // namespace ipuml
