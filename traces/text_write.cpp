#include "traces/text_write.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <zlib.h>

#include "traces/text_file.hpp"

namespace rm::traces {

namespace {

std::string gzip(std::string_view text) {
  z_stream z{};
  // windowBits 15 + 16: gzip wrapper; its header has mtime 0, so output is reproducible.
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw TraceError("cannot start gzip");
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw TraceError("gzip failed");
  return out;
}

// Named temporary files being written, removed by the SIGINT/SIGTERM handler so
// an interrupted run leaves nothing beside its outputs. Fixed slots: the
// handler may only touch memory that needs no allocation.
constexpr int kTempSlots = 8;
constexpr size_t kTempPathMax = 4096;
char g_temp_paths[kTempSlots][kTempPathMax];
volatile sig_atomic_t g_temp_used[kTempSlots];

void (*g_before_naming)() = nullptr;

extern "C" void remove_temps_and_reraise(int sig) {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i]) unlink(g_temp_paths[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_cleanup_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old{};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(sig, remove_temps_and_reraise);
  }
}

// Registers a temporary file for the handler for as long as it lives.
class TempFile {
 public:
  explicit TempFile(const std::string& path) {
    install_cleanup_handlers();
    if (path.size() >= kTempPathMax) return;
    for (int i = 0; i < kTempSlots; ++i)
      if (!g_temp_used[i]) {
        std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
        g_temp_used[i] = 1;
        slot_ = i;
        return;
      }
  }
  ~TempFile() {
    if (slot_ >= 0) g_temp_used[slot_] = 0;
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

 private:
  int slot_ = -1;
};

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and says whether the last writes were accepted.
  bool close() { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  int fd_;
};

[[noreturn]] void write_failed(const std::string& path, int err) {
  throw OutputError(fmt::format("{}: cannot write file ({})", path, std::strerror(err)));
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) write_failed(path, n < 0 ? errno : EIO);
    bytes.remove_prefix(size_t(n));
  }
}

// Where a write to `path` lands: a symlink is followed to its target (which
// may not exist yet), so the link stays a link.
std::string resolve_target(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(p, ec); ++hops) {
    const std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();
}

std::string folder_of(const std::string& target) {
  const std::filesystem::path parent = std::filesystem::path(target).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// A name for a temporary beside `target` (mkstemp's pattern, for the same look).
std::string temporary_name(const std::string& target) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string name = target + ".tmp-";
  for (int i = 0; i < 6; ++i) name += kLetters[random() % (sizeof kLetters - 1)];
  return name;
}

void before_naming() {
  if (g_before_naming) g_before_naming();
}

// A FIFO, a device, /dev/stdout: written into; replacing it would destroy it.
void write_in_place(const std::string& path, const std::string& target, bool fifo, std::string_view bytes) {
  // A FIFO is opened without waiting: with no reader, open(2) would block forever.
  Fd fd(::open(target.c_str(), O_WRONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0)));
  if (fd.get() < 0 && fifo && errno == ENXIO)
    throw OutputError(fmt::format("{}: a FIFO that no process reads (start its reader first; writing would wait "
                                  "forever)",
                                  path));
  if (fd.get() < 0) write_failed(path, errno);
  // With a reader there, writes may wait for it as usual.
  if (fifo && ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK) != 0) write_failed(path, errno);
  write_all(fd.get(), bytes, path);
  if (!fd.close()) write_failed(path, errno);
}

// Gives the complete unnamed file `fd` the name `target` through /proc; a file
// already there is replaced by way of a temporary name and a rename. False
// when linkat cannot name it here (no /proc): the caller writes a named
// temporary instead.
bool name_unnamed(int fd, const std::string& path, const std::string& target) {
  const std::string self = fmt::format("/proc/self/fd/{}", fd);
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, target.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  if (errno != EEXIST) return false;
  for (int tries = 0; tries < 100; ++tries) {
    const std::string tmp = temporary_name(target);
    TempFile registered(tmp);  // between the link and the rename, a SIGINT still removes it
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      if (errno == EEXIST) continue;
      return false;
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      write_failed(path, err);
    }
    return true;
  }
  throw OutputError(fmt::format("{}: cannot find a free temporary name beside it", path));
}

// The O_TMPFILE way: nothing has a name until the bytes are complete. False
// where the filesystem (or kernel) has no O_TMPFILE or linkat cannot name it.
bool write_unnamed(const std::string& path, const std::string& target, std::string_view bytes) {
  Fd fd(::open(folder_of(target).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
  if (fd.get() < 0) return false;
  fchmod(fd.get(), 0644);  // as the named way: outputs are meant to be shared, whatever the umask
  write_all(fd.get(), bytes, path);  // on error nothing is left: the file has no name
  before_naming();
  if (!name_unnamed(fd.get(), path, target)) return false;
  if (!fd.close()) write_failed(path, errno);
  return true;
}

// The portable way: a named temporary beside the target, then a rename.
void write_named(const std::string& path, const std::string& target, std::string_view bytes) {
  std::string tmp = target + ".tmp-XXXXXX";
  Fd fd(mkstemp(tmp.data()));
  if (fd.get() < 0)
    throw OutputError(fmt::format("{}: cannot create temporary file ({})", path, std::strerror(errno)));
  TempFile registered(tmp);
  fchmod(fd.get(), 0644);  // mkstemp makes 0600; outputs are meant to be shared
  try {
    write_all(fd.get(), bytes, path);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  before_naming();
  const bool closed = fd.close();
  if (!closed || std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    write_failed(path, err);
  }
}

}  // namespace

std::string output_path_problem(const std::string& path) {
  if (path.empty()) return "an empty output path (expected a file name, or - for standard output)";
  if (path == "-") return "";
  const std::string target = resolve_target(path);
  struct stat st{};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fmt::format("{}: is a directory, expected a file", path);
    return "";
  }
  const std::string folder = folder_of(target);
  if (::stat(folder.c_str(), &st) != 0) {
    if (errno == ENOENT) return fmt::format("{}: the folder {} does not exist", path, folder);
    return fmt::format("{}: cannot reach the folder {} ({})", path, folder, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("{}: {} is not a folder", path, folder);
  return "";
}

void write_text_file_atomic(const std::string& path, std::string_view text) {
  if (const std::string problem = output_path_problem(path); !problem.empty()) throw OutputError(problem);
  std::string gz;
  std::string_view bytes = text;
  if (has_gz_suffix(path)) {
    gz = gzip(text);
    bytes = gz;
  }
  if (path == "-") {  // standard output, as most tools read "-"
    write_standard_output(bytes);
    return;
  }
  const std::string target = resolve_target(path);
  struct stat st{};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    write_in_place(path, target, S_ISFIFO(st.st_mode), bytes);
    return;
  }
  if (!write_unnamed(path, target, bytes)) write_named(path, target, bytes);
}

void write_standard_output(std::string_view text) {
  std::fflush(stdout);  // whatever stdio holds goes first
  write_all(STDOUT_FILENO, text, "standard output");
}

void set_before_naming_hook(void (*hook)()) { g_before_naming = hook; }

}  // namespace rm::traces
