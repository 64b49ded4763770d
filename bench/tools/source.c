/*
 * The TCP source, in C (bench/tools/source.ts is the same in Bun): connects
 * to HOST:PORT, writes BYTES from a 1 MiB buffer of pseudo-random bytes,
 * half-closes, waits for the peer to close, and prints "start <ms>" when it
 * begins and {"bytes","startAt","writtenAt"} at the end (ms since the epoch).
 *
 *   cc -O2 -o source source.c && ./source 127.0.0.1 PORT BYTES
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: source HOST PORT BYTES\n");
    return 2;
  }
  static char buf[1 << 20];
  unsigned int x = 2463534242u;
  for (size_t i = 0; i < sizeof buf; i++) { /* xorshift: nothing on the path can compress it */
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    buf[i] = (char)x;
  }
  unsigned long long total = strtoull(argv[3], NULL, 10), sent = 0;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(atoi(argv[2]));
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  double start_at = now_ms();
  printf("start %.3f\n", start_at);
  fflush(stdout);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("source: connect");
    return 1;
  }
  while (sent < total) {
    size_t want = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
    ssize_t n = write(s, buf, want);
    if (n <= 0) {
      perror("source: write");
      return 1;
    }
    sent += (unsigned long long)n;
  }
  double written_at = now_ms();
  shutdown(s, SHUT_WR);
  while (read(s, buf, sizeof buf) > 0) {
  }
  printf("{\"bytes\":%llu,\"startAt\":%.3f,\"writtenAt\":%.3f}\n", sent, start_at, written_at);
  return 0;
}
