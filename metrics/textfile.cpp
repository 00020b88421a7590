#include "metrics/textfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace coexist::metrics {

void ReplaceFile(const std::filesystem::path& path, const std::string& text) {
  auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  auto fail = [&](const std::string& what, int error) {
    throw Error(
        ExitCode::kCantCreate,
        "cannot write metrics to " + path.string() + ": " + what + ": " + std::strerror(error),
        "check that the folder exists and that this user may create files in it.");
  };
  // O_CREAT | O_EXCL under a fresh name, made durable (fsync) before the
  // rename replaces the old file in one step.
  std::string temp = (folder / ("." + path.filename().string() + ".XXXXXX")).string();
  int fd = mkstemp(temp.data());
  if (fd < 0) fail("cannot create a temporary file in " + folder.string(), errno);
  auto discard = [&](const std::string& what) {
    int error = errno;
    close(fd);
    unlink(temp.c_str());
    fail(what, error);
  };
  // mkstemp makes it 0600.
  if (fchmod(fd, 0644) != 0) discard("chmod");
  for (size_t written = 0; written < text.size();) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) discard("write");
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) discard("fsync");
  if (close(fd) != 0) {
    int error = errno;
    unlink(temp.c_str());
    fail("close", error);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    unlink(temp.c_str());
    fail("rename", error);
  }
  // The rename itself survives a crash once the folder is synced.
  int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
}

}  // namespace coexist::metrics
