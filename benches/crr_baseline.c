/* The connect-request-response-close baseline for `benches/load.sh`: the smallest loop a C
 * programmer would write (blocking sockets, TCP_NODELAY off, 1-byte request and response, one
 * connection at a time, the client closing first), to compare `tcplab crr` against. Not part of tcplab; built by the bench.
 *   crr_baseline server ADDR PORT SECONDS      (accepts until SECONDS have passed)
 *   crr_baseline client ADDR PORT SECONDS      (prints transactions/s)                       */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s server|client ADDR PORT SECONDS\n", argv[0]); return 2; }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
    inet_pton(AF_INET, argv[2], &sa.sin_addr);
    double secs = atof(argv[4]), end = now() + secs;
    char b = 'x';
    if (strcmp(argv[1], "server") == 0) {
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 1024)) { perror("listen"); return 1; }
        struct timeval tv = { .tv_sec = 1 };
        setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        while (now() < end + 2) {
            int c = accept(l, NULL, NULL);
            if (c < 0) continue;
            /* Like tcplab crr (and real request/response traffic): answer, then wait for the
             * client's FIN so the TIME_WAIT lands on the client, not the server. */
            if (read(c, &b, 1) == 1 && write(c, &b, 1) == 1) {
                char tail[64];
                (void)read(c, tail, sizeof tail);
            }
            close(c);
        }
        return 0;
    }
    long n = 0;
    double start = now();
    while (now() < end) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 && write(s, &b, 1) == 1 && read(s, &b, 1) == 1) n++;
        close(s);
    }
    printf("%.1f\n", n / (now() - start));
    return 0;
}
