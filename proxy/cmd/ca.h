/* `sluice ca init DIR [--days N] [--permit HOST]...`: makes the inspection
 * CA that [tls] ca_cert and ca_key name. */
#ifndef SLUICE_CA_H
#define SLUICE_CA_H

/* argv[0] is "ca". Exit 0 when DIR/ca.pem and DIR/ca.key were written, 1 on
 * a failure (nothing left behind), 2 on a usage error or when either file
 * exists already. */
int sl_cmd_ca(int argc, char **argv);

#endif
