/*
 * The counting TCP sink, in C (bench/tools/sink.ts is the same in Bun, used
 * when no C compiler is around). Listens on 127.0.0.1:PORT (0 = any), prints
 * "sink listening port=N", and for every connection (a child process each)
 * reads to EOF into a 1 MiB buffer, throws the bytes away and prints one
 * JSON line {"bytes","openAt","firstAt","endAt"} (ms since the epoch).
 *
 *   cc -O2 -o sink sink.c && ./sink [port]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  signal(SIGCHLD, SIG_IGN); /* children reap themselves */
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(argc > 1 ? atoi(argv[1]) : 0);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128)) {
    perror("sink");
    return 1;
  }
  socklen_t len = sizeof a;
  getsockname(l, (struct sockaddr *)&a, &len);
  printf("sink listening port=%d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (;;) {
    int c = accept(l, NULL, NULL);
    if (c < 0) continue;
    if (fork() == 0) {
      close(l);
      double open_at = now_ms(), first_at = 0;
      static char buf[1 << 20];
      unsigned long long bytes = 0;
      for (;;) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        if (bytes == 0) first_at = now_ms();
        bytes += (unsigned long long)n;
      }
      double end_at = now_ms();
      printf("{\"bytes\":%llu,\"openAt\":%.3f,\"firstAt\":%.3f,\"endAt\":%.3f}\n", bytes, open_at, first_at, end_at);
      fflush(stdout);
      close(c);
      _exit(0);
    }
    close(c);
  }
}
