/* tx.h - device -> network, batched: the send thread */
#ifndef SLEEVE_TX_H
#define SLEEVE_TX_H

/* The batched send thread (arg: the struct sv); ends by cancellation. */
void *sv_tx_thread(void *arg);

#endif
