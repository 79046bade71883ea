// The load benchmark's ceiling: the smallest FastCGI responder behind the same nginx, with the same
// thread pool shape as folio-fcgi. It reads the request body and answers a fixed JSON success (or the
// bytes of BODY_FILE, to price a response of a given size), so the figures it gets are what nginx +
// FastCGI + the loopback can do at best.
//   hello-fcgi SOCKET [WORKERS [BODY_FILE]]
#include <fcgiapp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  FCGX_Init();
  unlink(argv[1]);
  const int fd = FCGX_OpenSocket(argv[1], 128);
  if (fd < 0) return 1;
  chmod(argv[1], 0666);
  const int workers = argc > 2 ? std::atoi(argv[2]) : 4;
  std::string reply = R"({"result":{"status":"success","message":"hello","data":["hello!!"]}})";
  if (argc > 3) {
    std::ifstream f(argv[3], std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    reply = ss.str();
  }
  const std::string out = "Status: 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(reply.size()) + "\r\n\r\n" + reply;
  // libfcgi turns SIGTERM into a flag its accept loop never sees while blocked: take it here instead.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::vector<std::thread> pool;
  for (int i = 0; i < workers; ++i)
    pool.emplace_back([fd, &out] {
      FCGX_Request req;
      FCGX_InitRequest(&req, fd, 0);
      std::string body(1 << 16, '\0');
      while (FCGX_Accept_r(&req) >= 0) {
        while (FCGX_GetStr(body.data(), static_cast<int>(body.size()), req.in) > 0) {
        }
        FCGX_PutStr(out.data(), static_cast<int>(out.size()), req.out);
        FCGX_Detach(&req);  // read to its end: closed at once, as folio-fcgi does (service/main.cpp)
        FCGX_Finish_r(&req);
      }
    });
  int sig = 0;
  sigwait(&stop, &sig);
  unlink(argv[1]);
  _exit(0);
}
