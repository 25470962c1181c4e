/* basic.h - --basic: one syscall per packet, both directions */
#ifndef SLEEVE_BASIC_H
#define SLEEVE_BASIC_H

/* The unbatched threads (arg: the struct sv); each ends by cancellation. */
void *sv_basic_tx_thread(void *arg);
void *sv_basic_rx_thread(void *arg);

#endif
