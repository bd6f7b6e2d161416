/*-------------------------------------------------------------------------
 *
 * gcs_test.c
 *		Unit tests of the Google Cloud Storage parts of src/io: V4 signing
 *		in Google's dialect, gs:// locations, the JSON API batch of
 *		deletes (its body and the reader of its answer), service account
 *		keys and the RS256 JWT, vended tokens.
 *
 * The signing cases are Google's V4 signing conformance cases
 * (https://github.com/googleapis/conformance-tests, storage/v1/
 * v4_signatures.json, Apache 2.0): for each, the canonical request and
 * the string to sign the signer builds are compared with the published
 * ones, and the RS256 signature of the string to sign with the published
 * inactive test key (test_service_account.not-a-test.json, "a dummy
 * service account JSON file that is inactive") with the published
 * signature, which checks the RS256 signer of the JWT flow too.  Those
 * cases sign with RSA (GOOG4-RSA-SHA256); the HMAC form differs only in
 * the key derivation, checked here against an independent HMAC chain.
 *
 * test/unit/gcs_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "io/http/gcs_auth.h"
#include "io/storage/storage_int.h"
#include "unit.h"

typedef struct V4Case
{
	const char *description;
	const char *method;
	const char *host;
	const char *path;			/* encoded once */
	const char *query;			/* encoded, "" for none */
	const char *date;
	const char *payload;
	long		expires;
	IoHeader	headers[4];
	int			nheaders;
	const char *canonical_request;
	const char *string_to_sign;
	const char *signature;		/* RS256 with dummy_key_pem, hex */
} V4Case;

static const V4Case v4_cases[] = {
	{"Simple GET", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n00e2fb794ea93d7adb703edaebdd509821fcc7d4f1a79ac5c8d2b394df109320",
	"95e6a13d43a1d1962e667f17397f2b80ac9bdd1669210d5e08e0135df9dff4e56113485dbe429ca2266487b9d1796ebdee2d7cf682a6ef3bb9fbb4c351686fba90d7b621cf1c4eb1fdf126460dd25fa0837dfdde0a9fd98662ce60844c458448fb2b352c203d9969cb74efa4bdb742287744a4f2308afa4af0e0773f55e32e92973619249214b97283b2daa14195244444e33f938138d1e5f561088ce8011f4986dda33a556412594db7c12fc40e1ff3f1bedeb7a42f5bcda0b9567f17f65855f65071fabb88ea12371877f3f77f10e1466fff6ff6973b74a933322ff0949ce357e20abe96c3dd5cfab42c9c83e740a4d32b9e11e146f0eb3404d2e975896f74"},
	{"Simple PUT", "PUT", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"PUT\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n78742860705da91404222d5d66ff89850292471199c3c2808d116ad12e6177b4",
	"8adff1d4285739e31aa68e73767a46bc5511fde377497dbe08481bf5ceb34e29cc9a59921748d8ec3dd4085b7e9b7772a952afedfcdaecb3ae8352275b8b7c867f204e3db85076220a3127a8a9589302fc1181eae13b9b7fe41109ec8cdc93c1e8bac2d7a0cc32a109ca02d06957211326563ab3d3e678a0ba296e298b5fc5e14593c99d444c94724cc4be97015dbff1dca377b508fa0cb7169195de98d0e4ac96c42b918d28c8d92d33e1bd125ce0fb3cd7ad2c45dae65c22628378f6584971b8bf3945b26f2611eb651e9b6a8648970c1ecf386bb71327b082e7296c4e1ee2fc0bdd8983da80af375c817fb1ad491d0bc22c0f51dba0d66e2cffbc90803e47"},
	{"POST for resumable uploads", "POST", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"X-Goog-Resumable", "start"}}, 1,
	"POST\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host%3Bx-goog-resumable\nhost:storage.googleapis.com\nx-goog-resumable:start\n\nhost;x-goog-resumable\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n877f8b40179d2753296f2fd6de815ab40503c7a3c446a7b44aa4e74422ff4daf",
	"4a6d39b23343cedf4c30782aed4b384001828c79ffa3a080a481ea01a640dea0a0ceb58d67a12cef3b243c3f036bb3799c6ee88e8db3eaf7d0bdd4b70a228d0736e07eaa1ee076aff5c6ce09dff1f1f03a0d8ead0d2893408dd3604fdabff553aa6d7af2da67cdba6790006a70240f96717b98f1a6ccb24f00940749599be7ef72aaa5358db63ddd54b2de9e2d6d6a586eac4fe25f36d86fc6ab150418e9c6fa01b732cded226c6d62fc95b72473a4cc55a8257482583fe66d9ab6ede909eb41516a8690946c3e87b0f2052eb0e97e012a14b2f721c42e6e19b8a1cd5658ea36264f10b9b1ada66b8ed5bf7ed7d1708377ac6e5fe608ae361fb594d2e5b24c54"},
	{"Vary expiration and timestamp", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190301T090000Z", "UNSIGNED-PAYLOAD", 20, {{NULL, NULL}}, 0,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190301%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190301T090000Z&X-Goog-Expires=20&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190301T090000Z\n20190301/auto/storage/goog4_request\n779f19fdb6fd381390e2d5af04947cf21750277ee3c20e0c97b7e46a1dff8907",
	"9669ed5b10664dc594c758296580662912cf4bcc5a4ba0b6bf055bcbf6f34eed7bdad664f534962174a924741a0c273a4f67bc1847cef20192a6beab44223bd9d4fbbd749c407b79997598c30f82ddc269ff47ec09fa3afe74e00616d438df0d96a7d8ad0adacfad1dc3286f864d924fe919fb0dce45d3d975c5afe8e13af2db9cc37ba77835f92f7669b61e94c6d562196c1274529e76cfff1564cc2cad7d5387dc8e12f7a5dfd925685fe92c30b43709eee29fa2f66067472cee5423d1a3a4182fe8cea75c9329d181dc6acad7c393cd04f8bf5bc0515127d8ebd65d80c08e19ad03316053ea60033fd1b1fd85a69c576415da3bf0a3718d9ea6d03e0d66f0"},
	{"Vary bucket and object", "GET", "storage.googleapis.com", "/test-bucket2/test-object2", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket2/test-object2\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\na139afbf35ac30e9864f63197f79609731ab1b0ca166e2a456dba156fcd3f9ce",
	"36e3d58dfd3ec1d2dd2f24b5ee372a71e811ffaa2162a2b871d26728d0354270bc116face87127532969c4a3967ed05b7309af741e19c7202f3167aa8c2ac420b61417d6451442bb91d7c822cd17be8783f01e05372769c88913561d27e6660dd8259f0081a71f831be6c50283626cbf04494ac10c394b29bb3bce74ab91548f58a37118a452693cf0483d77561fc9cac8f1765d2c724994cca46a83517a10157ee0347a233a2aaeae6e6ab5e204ff8fc5f54f90a3efdb8301d9fff5475d58cd05b181affd657f48203f4fb133c3a3d355b8eefbd10d5a0a5fd70d06e9515460ad74e22334b2cba4b29cae4f6f285cdb92d8f3126d7a1479ca3bdb69c207d860"},
	{"Slashes in object name should not be URL encoded", "GET", "storage.googleapis.com", "/test-bucket/path/with/slashes/under_score/amper%26sand/file.ext", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"header/name/with/slash", "should-be-encoded"}}, 1,
	"GET\n/test-bucket/path/with/slashes/under_score/amper%26sand/file.ext\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=header%2Fname%2Fwith%2Fslash%3Bhost\nheader/name/with/slash:should-be-encoded\nhost:storage.googleapis.com\n\nheader/name/with/slash;host\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\nf1d206dd8cbe1b892d4081ccddae0927d9f5fee5653fb2a2f43e7c20ed455cad",
	"2a9a82e84e39f5d2c0d980514db17f8c3dece473c9a5743d54e8453f9811927b1b99ce548c534cababd8fa339183e75b410e12e32a4c72f5ff176e95651fabed0072e59e7e236eb7e26f52c0ce599db1c47ae07af1a98d20872b6fde23432c0a5fcf4fb2dda735169198c80cd5cc51be9904f7e5eef2cc489ff44ac5697c529e4b34ac08709a7d2e425619377212c64561ed8b4d2fcb70a26e4f9236f995ab4658d240ac85c7a353bae6b2d39d5fc0716afa435a1f6e100db5504612b5e610db370623ab4b8eba3c03c98f23dcb4b9ffd518f2212abb2f93649d25385d71603d470cff0b7631adb9d0849d38609dedb3097761c8f47ec0d57777bb063611c05b"},
	{"Forward Slashes should not be stripped", "GET", "storage.googleapis.com", "/test-bucket//path/with/slashes/under_score/amper%26sand/file.ext", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket//path/with/slashes/under_score/amper%26sand/file.ext\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n63c601ecd6ccfec84f1113fc906609cbdf7651395f4300cecd96ddd2c35164f8",
	"2db8b70e3f85b39be7824f6d02be31af2e6a2eb63f6bb41254851f7ef51bdad8963a9d2b254f8379c1780c8e6898be002d4100a0abd3d45f1437687fed65d15dd237c3a6f3c399c64ffd4e4cea7ef1c2f0391d35ecbeeaf3e3148d23c6f24c839cfcd92c1496332f5bfbbf1ed1e957eb45fad57df24828c96cf243eec23fba014d277c22a572708beb355888c5a8c0047cb3015d7f62cc90285676e7e34626fd0ce9ba5e0da39fc3de0035cc3ad120c46cb73db87246ae123f7a342c235e9480bd7d7e00c13b1e1bb7be5e2bce74d59a53505172463b48aefeedb48281d90874aa4177c881d3596ed1067f02eaac13d810a7aed234c41978b1394d0ce3662f76"},
	{"Simple headers", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"BAR", "BAR-value"}, {"foo", "foo-value"}}, 2,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=bar%3Bfoo%3Bhost\nbar:BAR-value\nfoo:foo-value\nhost:storage.googleapis.com\n\nbar;foo;host\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n59c1ac1a6ee7d773d5c4487ecc861d60b71c4871dd18fc7d8485fac09df1d296",
	"68ecd3b008328ed30d91e2fe37444ed7b9b03f28ed4424555b5161980531ef87db1c3a5bc0265aad5640af30f96014c94fb2dba7479c41bfe1c020eb90c0c6d387d4dd09d4a5df8b60ea50eb6b01cdd786a1e37020f5f95eb8f9b6cd3f65a1f8a8a65c9fcb61ea662959efd9cd73b683f8d8804ef4d6d9b2852419b013368842731359d7f9e6d1139032ceca75d5e67cee5fd0192ea2125e5f2955d38d3d50cf116f3a52e6a62de77f6207f5b95aaa1d7d0f8a46de89ea72e7ea30f21286318d7eba0142232b0deb3a1dc9e1e812a981c66b5ffda3c6b01a8a9d113155792309fd53a3acfd054ca7776e8eec28c26480cd1e3c812f67f91d14217f39a606669d"},
	{"Headers with colons", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"BAR", "2023-02-10T03:"}, {"foo", "2023-02-10T02:00:00Z"}}, 2,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=bar%3Bfoo%3Bhost\nbar:2023-02-10T03:\nfoo:2023-02-10T02:00:00Z\nhost:storage.googleapis.com\n\nbar;foo;host\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\na2a6df7e6bd818894e1f60ac3c393901b512ca1cf1061ba602dace3fb38c19a6",
	"30b831c18b5cdef6dceaa476a395a28d80002ad70b4419af8fd63eaad02c2fbb4b4829b3a4e33e7796a9ce92735498dfc20e0fbc177172f7c8ab6a07736512c7c923ef2f28a2e72d727fd61ca89495c9e62d51b93a2f7061451240c909ed8d05a7bcf616c1ad90fa5cdbc27c4724dec6b29db04129b32402db4ddf7b5b554724481bfdbf41cb24c3c6b9e33bb411c864077d6a19a750a90eb5ad9370d2b171df2813c9a864b40b2ee215ae9790d7916155de863708aa5121bca42e4695def5322f3726f8e1a7ec56da7a1a4f6b959253513a10f7edf6594c02340021b8cc709b0177ec6bb127fc2fb705f508bde045ed94603471c19c1c6af165f559a3c4741b"},
	{"Headers should be trimmed", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"collapsed", "abc    def"}, {"leading", "    xyz"}, {"trailing", "abc    "}, {"tabs", "\tabc\t\t\t\tdef\t"}}, 4,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=collapsed%3Bhost%3Bleading%3Btabs%3Btrailing\ncollapsed:abc def\nhost:storage.googleapis.com\nleading:xyz\ntabs:abc def\ntrailing:abc\n\ncollapsed;host;leading;tabs;trailing\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n19153e83555808dbfeb8969043cc8ce8d5db0cce91dc11fb9df58b8130f09d42",
	"75d77a3ed2d9b74ff7e1e23b2fd7cc714ad4cc32518c65f3a8197827cd87d302623bab990cf2ff3a633bfaae69b6c2d897add78c105aa68411229610421c4239579add4aff6bdbd5067a0fd61c3aa0029d7de0f8ae88fa3458fa70f875e841d6df9598597d9012b9f848c6857e08f2704ca2f332c71738490ffdda2ed928f9340549d7295745725062d28dc1696eab7cb3b88ac4fd445e951423f645d680a60dd8033d65b65f4c10286f59f4258dbb2bcf36a76ffdd40574104cbbf0b76901c24df5854f24c42e9192fcedc386d85704fec6a6bad3a5201e1fb6c491a4c43371b0913420743580daf3504e99204c6ec894b4d70cd27bc60c3fe2850e8bf3ed22"},
	{"Header value with multiple inline values", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"multiple", " xyz ,  abc, def  , xyz   "}}, 1,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host%3Bmultiple\nhost:storage.googleapis.com\nmultiple:xyz , abc, def , xyz\n\nhost;multiple\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n4df8e486146c31f1c8cd4e4c730554cde4326791ba48ec11fa969a3de064cd7f",
	"5cc113735625341f59c7203f0c2c9febc95ba6af6b9c38814f8e523214712087dc0996e4960d273ae1889f248ac1e58d4d19cb3a69ad7670e9a8ca1b434e878f59339dc7006cf32dfd715337e9f593e0504371839174962a08294586e0c78160a7aa303397888c8350637c6af3b32ac310886cc4590bfda9ca561ee58fb5b8ec56bc606d2ada6e7df31f4276e9dcb96bcaea39dc2cd096f3fad774f9c4b30e317ad43736c05f76831437f44e8726c1e90d3f6c9827dc273f211f32fc85658dfc5d357eb606743a6b00a29e519eef1bebaf9db3e8f4b1f5f9afb648ad06e60bc42fa8b57025056697c874c9ea76f5a73201c9717ea43e54713ff3502ff3fc626b"},
	{"Customer-supplied encryption key", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"X-Goog-Encryption-Algorithm", "AES256"}, {"X-Goog-Encryption-Key", "key"}, {"X-Goog-Encryption-Key-Sha256", "key-hash"}}, 3,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host%3Bx-goog-encryption-algorithm%3Bx-goog-encryption-key%3Bx-goog-encryption-key-sha256\nhost:storage.googleapis.com\nx-goog-encryption-algorithm:AES256\nx-goog-encryption-key:key\nx-goog-encryption-key-sha256:key-hash\n\nhost;x-goog-encryption-algorithm;x-goog-encryption-key;x-goog-encryption-key-sha256\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n66a45104eba8bdd9748723b45cbd54c3f0f6dba337a5deb9fb6a66334223dc06",
	"278a1c5a3bad248637054a047014760353942433955871031ed08f515b54588654ad033e91f046ab202b68673030e117d1b786c325e870238b035ba75b3feed560a17aff9bab6bddebd4a31a52cb68b214e27d3b0bd886502c6b36b164306fe88b5a07c6063592afe746b2a5d205dbe90dd5386b94f0a78f75d9f53ee884e18f476e8fc2eb1dd910ce0b4ae1f5d7b09876ef9bf983f539c028429e14bad3c75dbd4ed1ae37856f6d6f8a1805eaf8b52a0d6fc993902e4c1ee8de477661f7b67c3663000474cb00e178189789b2a3ed6bd21b4ade684fca8108ac4dd106acb17f5954d045775f7aa5a98ebda5d3075e11a8ea49c64c6ad1481e463e8c9f11f704"},
	{"List Objects", "GET", "storage.googleapis.com", "/test-bucket", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n51a7426c2a6c6ab80f336855fc629461ff182fb1d2cb552ac68e5ce8e25db487",
	"6dbe94f8e52b2b8a9a476b1c857efa474e09944e2b52b925800316e094a7169d8dbe0df9c0ac08dabb22ac7e827470ceccd65f5a3eadba2a4fb9beebfe37f0d9bb1e552b851fa31a25045bdf019e507f5feb44f061551ef1aeb18dcec0e38ba2e2f77d560a46eaace9c56ed9aa642281301a9d848b0eb30749e34bc7f73a3d596240533466ff9b5f289cd0d4c845c7d96b82a35a5abd0c3aff83e4440ee6873e796087f43545544dc8c01afe1d79c726696b6f555371e491980e7ec145cca0803cf562c38f3fa1d724242f5dea25aac91d74ec9ddd739ff65523627763eaef25cd1f95ad985aaf0079b7c74eb5bcb2870a9b137a7b2c8e41fbe838c95872f75b"},
	{"Query Parameter Encoding", "GET", "storage.googleapis.com", "/test-bucket/test-object", "aA0%C3%A9%2F%3D%25-_.~=~%20._-%25%3D%2F%C3%A90Aa", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host&aA0%C3%A9%2F%3D%25-_.~=~%20._-%25%3D%2F%C3%A90Aa\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n448f96c23dafa8210900554e138b2b5fd55bc53ef53b8637cecc3edec45a8fcf",
	"0e4f289c28626a32af95d78f5a0d2c75e5f0bef1cfe5035a532a8185e3ad45b1d5e8ad5ae0fb1898420e40a1576479861c6579db7e3b28ef8386160995ac1374be85e780ac3dfcc62538e9b2e2c51555950fb6fd0d7ecc509d3ccd9c02af5a6c6eb930d21a7383792300eb50a093a597c1da2a290ed56b01844251f8271d0d5e61fc3f4273a0c26f80e061c06124d93346ea1c50388e3fe73494c05ac27a54caedc04d1476c276c7602554e4cc1933e41df31ea523f4009e879c92333f98b4313755470d7e400bbbde9f5bef36f40b2a1c4a85edbd62aaa84a516e3df055d5d3f575b9ea0f1c24f057240852d9e618403e1dd2cd0fa7fc16b071b07322172256"},
	{"Query Parameter Ordering", "GET", "storage.googleapis.com", "/test-bucket/test-object", "prefix=%2Ffoo&X-Goog-Meta-Foo=bar", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-Meta-Foo=bar&X-Goog-SignedHeaders=host&prefix=%2Ffoo\nhost:storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n4dafe74ad142f32b7c25fc4e6b38fd3b8a6339d7f112247573fb0066f637db6c",
	"a07745e1b3d59b85cbe11aa766df72c22468959e7217615dccb7f030234f66b60b37e480f30725ed51f29816362ca8286c619ebb66448ff1d370be2a4a48aacf20d3d2d6200ed17341a5791baf2ee5cd9c2823adacc6264f66c8a54fa887e1bce3c55cf78fb2f6a52618cf09d6f945f63d148052a7b66a75e075ff5065828a806b84bdc49a42399be7483225c720d5e18a6160f79d815f433e7921694fe1d041099851793c2581db0e5ca503cfb566e414f900ceede5f9b22030edd32ab20b6f7f9fb2afba89098b9364e03397c03a94eac3a140c99979b8786844fb4f6c62c1985378939dd1bbaea8e41b9100dda85a27733171cc78d96ee362ea2c3432f4d8"},
	{"Header Ordering", "GET", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{"X-Goog-Date", "20190201T090000Z"}}, 1,
	"GET\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host%3Bx-goog-date\nhost:storage.googleapis.com\nx-goog-date:20190201T090000Z\n\nhost;x-goog-date\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n4052143280d90d5f4a8c878ff7418be6fee5d34e50b1da28d8081a094b88fa61",
	"55a28435997457f1498291e878fd39c5f321973057d2541886020fdfd212b1467d9eeffdc70951ea952d634cb4193e657ed5b7860c46d37f7d904774680a16e518aa9dff273e8441d6893de615eb592e3113d682ad64a87eb0e0c48df17c30f899e7f940ba230530b30f725ab9ec38789682413752de6a026ae69dd858843100645f3ec986aed618d229f8844d378e0e66e907ede6dff7aac56723f51eb830e8877a56100c86a876173424602abefe6c22b6540a2b36634860b2e89137f297cca8f080bdf3433a9d614c5ab2ec84f65412b45516b30500886a2300f23c3423ae0e91546e3471ee08d06894bddc76203a418d46f35bf0b4574f7b24a693fb046c"},
	{"Signed Payload Instead of UNSIGNED-PAYLOAD", "PUT", "storage.googleapis.com", "/test-bucket/test-object", "", "20190201T090000Z", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982", 10, {{"X-Goog-Content-SHA256", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982"}, {"X-TestCaseMetadata-Payload-Value", "hello"}}, 2,
	"PUT\n/test-bucket/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host%3Bx-goog-content-sha256%3Bx-testcasemetadata-payload-value\nhost:storage.googleapis.com\nx-goog-content-sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982\nx-testcasemetadata-payload-value:hello\n\nhost;x-goog-content-sha256;x-testcasemetadata-payload-value\n2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\nbe21a0841a897930ff5cf72e6e74ec5274efd76c3fe4cde6678f24a0a3d6dbec",
	"3e5a9669e9aa162888dff1553d24c159bad4f16d444987f6a1b26d8ad0cb7927f15bfaf79c205324d2138fd1f62edb255430c77a03c0d6e9601399e2519014f9e1a7051d9be735cde530022c84602b1c4c25c86cb1e1584489e49d511c9a618a1a8443af31626ca5b2ad105eda1e4499f52b4043f3c1a3bd40c06c0cae36bb19a50ed8671e5d2cdbb148a196ce5a8c14d6970c08225da293e1ef400c92e7a3d5ba0a29ad0893827c96b203a04b04ebd51929bf99b323beba93097dfee700ee2c1bd97013779e5c8f156e56175d4d07e453b2eb0d616086f9f4753dde63507efe88b0dec29c872d25d9465f07778b16b532814148c578ee7e64ed8437006fa551"},
	{"Virtual Hosted Style", "GET", "test-bucket.storage.googleapis.com", "/test-object", "", "20190201T090000Z", "UNSIGNED-PAYLOAD", 10, {{NULL, NULL}}, 0,
	"GET\n/test-object\nX-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=test-iam-credentials%40dummy-project-id.iam.gserviceaccount.com%2F20190201%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20190201T090000Z&X-Goog-Expires=10&X-Goog-SignedHeaders=host\nhost:test-bucket.storage.googleapis.com\n\nhost\nUNSIGNED-PAYLOAD",
	"GOOG4-RSA-SHA256\n20190201T090000Z\n20190201/auto/storage/goog4_request\n89eeae48258eccdcb1f592fb908008e3f5d36a949c002c1e614c94356dc18fc6",
	"06c633ea060b0eda81ee58dd3337b01b0d243a44f18cb03ec948861f533a129e579c7fd4c856d187f1c7b86e5715ea0abf6a1c6ba32b69274d22b1b0406df6847dc87f0d289fe8dc0682351574849b8b13e4b66922f39441af96becb73ea4c56cd5e3eeb30bc91fe84e8bd205adca8639253bdb65b2fcaf2598a230c6d8f6d8177c9e58a61b6e826767f594056b490184d676897c4bbedc15d6fbf08c3fa82a406c62e74db661e6c5d7d3ced29e0619ee719dce4b8136360345b8dce120b9f1debd511c8dac3e6d874ee05bfda8c8f1c4fedd0c07fc6d98f5f18a349bb204d8ff401402a025194e2792df8a09282141157e4ca51d26a8d0d142a01c805321911"},
};
static const char dummy_key_pem[] =
"-----BEGIN PRIVATE KEY-----\n"
"MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCsPzMirIottfQ2\n"
"ryjQmPWocSEeGo7f7Q4/tMQXHlXFzo93AGgU2t+clEj9L5loNhLVq+vk+qmnyDz5\n"
"Q04y8jVWyMYzzGNNrGRW/yaYqnqlKZCy1O3bmnNjV7EDbC/jE1ZLBY0U3HaSHfn6\n"
"S9ND8MXdgD0/ulRTWwq6vU8/w6i5tYsU7n2LLlQTl1fQ7/emO9nYcCFJezHZVa0H\n"
"meWsdHwWsok0skwQYQNIzP3JF9BpR5gJT2gNge6KopDesJeLoLzaX7cUnDn+CAnn\n"
"LuLDwwSsIVKyVxhBFsFXPplgpaQRwmGzwEbf/Xpt9qo26w2UMgn30jsOaKlSeAX8\n"
"cS6ViF+tAgMBAAECggEACKRuJCP8leEOhQziUx8Nmls8wmYqO4WJJLyk5xUMUC22\n"
"SI4CauN1e0V8aQmxnIc0CDkFT7qc9xBmsMoF+yvobbeKrFApvlyzNyM7tEa/exh8\n"
"DGD/IzjbZ8VfWhDcUTwn5QE9DCoon9m1sG+MBNlokB3OVOt8LieAAREdEBG43kJu\n"
"yQTOkY9BGR2AY1FnAl2VZ/jhNDyrme3tp1sW1BJrawzR7Ujo8DzlVcS2geKA9at7\n"
"55ua5GbHz3hfzFgjVXDfnkWzId6aHypUyqHrSn1SqGEbyXTaleKTc6Pgv0PgkJjG\n"
"hZazWWdSuf1T5Xbs0OhAK9qraoAzT6cXXvMEvvPt6QKBgQDXcZKqJAOnGEU4b9+v\n"
"Odoh+nssdrIOBNMu1m8mYbUVYS1aakc1iDGIIWNM3qAwbG+yNEIi2xi80a2RMw2T\n"
"9RyCNB7yqCXXVKLBiwg9FbKMai6Vpk2bWIrzahM9on7AhCax/X2AeOp+UyYhFEy6\n"
"UFG4aHb8THscL7b515ukSuKb5QKBgQDMq+9PuaB0eHsrmL6q4vHNi3MLgijGg/zu\n"
"AXaPygSYAwYW8KglcuLZPvWrL6OG0+CrfmaWTLsyIZO4Uhdj7MLvX6yK7IMnagvk\n"
"L3xjgxSklEHJAwi5wFeJ8ai/1MIuCn8p2re3CbwISKpvf7Sgs/W4196P4vKvTiAz\n"
"jcTiSYFIKQKBgCjMpkS4O0TakMlGTmsFnqyOneLmu4NyIHgfPb9cA4n/9DHKLKAT\n"
"oaWxBPgatOVWs7RgtyGYsk+XubHkpC6f3X0+15mGhFwJ+CSE6tN+l2iF9zp52vqP\n"
"Qwkjzm7+pdhZbmaIpcq9m1K+9lqPWJRz/3XXuqi+5xWIZ7NaxGvRjqaNAoGAdK2b\n"
"utZ2y48XoI3uPFsuP+A8kJX+CtWZrlE1NtmS7tnicdd19AtfmTuUL6fz0FwfW4Su\n"
"lQZfPT/5B339CaEiq/Xd1kDor+J7rvUHM2+5p+1A54gMRGCLRv92FQ4EON0RC1o9\n"
"m2I4SHysdO3XmjmdXmfp4BsgAKJIJzutvtbqlakCgYB+Cb10z37NJJ+WgjDt+yT2\n"
"yUNH17EAYgWXryfRgTyi2POHuJitd64Xzuy6oBVs3wVveYFM6PIKXlj8/DahYX5I\n"
"R2WIzoCNLL3bEZ+nC6Jofpb4kspoAeRporj29SgesK6QBYWHWX2H645RkRGYGpDo\n"
"51gjy9m/hSNqBbH2zmh04A==\n"
"-----END PRIVATE KEY-----\n"
		   ;

/* The conformance cases sign with RSA: the same names but the algorithm. */
static const IoSigV4Dialect goog_rsa = {
	"GOOG4-RSA-SHA256", "GOOG4", "goog4_request", "x-goog", "X-Goog"
};

static void
hex(const unsigned char *in, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", in[i]);
	out[2 * n] = '\0';
}

static void
test_v4_conformance(void)
{
	for (size_t c = 0; c < sizeof(v4_cases) / sizeof(v4_cases[0]); c++)
	{
		const V4Case *k = &v4_cases[c];
		IoHeader	h[5];
		IoSigV4Input in;
		IoSigV4Output out;
		TmsError	err;
		unsigned char *sig;
		size_t		siglen;
		char		sighex[1024];

		h[0].name = "host";
		h[0].value = k->host;
		for (int i = 0; i < k->nheaders; i++)
			h[i + 1] = k->headers[i];
		memset(&in, 0, sizeof(in));
		in.dialect = &goog_rsa;
		in.method = k->method;
		in.path = k->path;
		in.query = k->query[0] ? k->query : NULL;
		in.headers = h;
		in.nheaders = (size_t) k->nheaders + 1;
		in.payload_hash = k->payload;
		in.access_key_id = "test-iam-credentials@dummy-project-id.iam.gserviceaccount.com";
		in.secret_access_key = "unused";
		in.region = "auto";
		in.service = "storage";
		in.amz_date = k->date;
		in.query_mode = true;
		in.expires_seconds = k->expires;
		if (io_sigv4_sign(&in, &out, &err) != 0)
		{
			FAIL("%s: %s", k->description, err.message);
			continue;
		}
		CHECK(strcmp(out.canonical_request, k->canonical_request) == 0,
			  "%s: canonical request\n%s\nexpected\n%s", k->description,
			  out.canonical_request, k->canonical_request);
		CHECK(strcmp(out.string_to_sign, k->string_to_sign) == 0,
			  "%s: string to sign\n%s", k->description, out.string_to_sign);
		if (io_rs256_sign(dummy_key_pem, out.string_to_sign, strlen(out.string_to_sign),
						  &sig, &siglen, &err) != 0)
			FAIL("%s: RS256: %s", k->description, err.message);
		else
		{
			CHECK(siglen == 256, "%s: %zu", k->description, siglen);
			hex(sig, siglen, sighex);
			CHECK(strcmp(sighex, k->signature) == 0, "%s: signature %s", k->description, sighex);
			io_free(sig);
		}
		io_sigv4_free(&out);
	}
}

static bool
hmac(const void *key, size_t keylen, const char *msg, unsigned char *out)
{
	unsigned int len = 32;

	return HMAC(EVP_sha256(), key, (int) keylen, (const unsigned char *) msg,
				strlen(msg), out, &len) != NULL;
}

/* The HMAC header form: Google's names, and the key derived with "GOOG4". */
static void
test_v4_hmac_header(void)
{
	IoHeader	h[2] = {{"host", "127.0.0.1:9000"}, {"range", "bytes=0-9"}};
	IoSigV4Input in;
	IoSigV4Output out;
	TmsError	err;
	unsigned char k1[32],
				k2[32],
				k3[32],
				k4[32],
				sig[32];
	char		sighex[65];
	char		expect_auth[512];
	const char *auth = NULL;
	const char *date = NULL;
	const char *sha = NULL;

	memset(&in, 0, sizeof(in));
	in.dialect = &io_sigv4_goog;
	in.method = "GET";
	in.path = "/bucket/a%20b/c";
	in.query = "list-type=2&prefix=x%2Fy";
	in.headers = h;
	in.nheaders = 2;
	in.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	in.access_key_id = "GOOGTS7C7FUP3AIRVJTE2BCD";
	in.secret_access_key = "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ";
	in.region = "auto";
	in.service = "storage";
	in.amz_date = "20240102T030405Z";
	in.add_content_sha256 = true;
	if (io_sigv4_sign(&in, &out, &err) != 0)
	{
		FAIL("%s", err.message);
		return;
	}
	CHECK(strstr(out.canonical_request, "x-goog-content-sha256:e3b0c4") != NULL &&
		  strstr(out.canonical_request, "x-goog-date:20240102T030405Z") != NULL &&
		  strstr(out.canonical_request, "\nlist-type=2&prefix=x%2Fy\n") != NULL &&
		  strstr(out.canonical_request, "x-amz") == NULL,
		  "canonical request:\n%s", out.canonical_request);
	CHECK(strcmp(out.signed_headers, "host;range;x-goog-content-sha256;x-goog-date") == 0,
		  "%s", out.signed_headers);
	CHECK(strncmp(out.string_to_sign,
				  "GOOG4-HMAC-SHA256\n20240102T030405Z\n20240102/auto/storage/goog4_request\n",
				  71) == 0, "%s", out.string_to_sign);
	/* the signing key: GOOG4 + secret, date, region, service, goog4_request */
	CHECK(hmac("GOOG4bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ", 45, "20240102", k1) &&
		  hmac(k1, 32, "auto", k2) && hmac(k2, 32, "storage", k3) &&
		  hmac(k3, 32, "goog4_request", k4) && hmac(k4, 32, out.string_to_sign, sig));
	hex(sig, 32, sighex);
	CHECK(strcmp(sighex, out.signature) == 0, "%s vs %s", out.signature, sighex);
	snprintf(expect_auth, sizeof(expect_auth),
			 "GOOG4-HMAC-SHA256 Credential=GOOGTS7C7FUP3AIRVJTE2BCD/20240102/auto/storage/goog4_request, "
			 "SignedHeaders=host;range;x-goog-content-sha256;x-goog-date, Signature=%s", sighex);
	for (size_t i = 0; i < out.nadd_headers; i++)
	{
		if (strcmp(out.add_headers[i].key, "Authorization") == 0)
			auth = out.add_headers[i].value;
		else if (strcmp(out.add_headers[i].key, "X-Goog-Date") == 0)
			date = out.add_headers[i].value;
		else if (strcmp(out.add_headers[i].key, "x-goog-content-sha256") == 0)
			sha = out.add_headers[i].value;
	}
	CHECK(auth != NULL && strcmp(auth, expect_auth) == 0, "%s", auth ? auth : "(none)");
	CHECK(date != NULL && strcmp(date, "20240102T030405Z") == 0);
	CHECK(sha != NULL && strncmp(sha, "e3b0c4", 6) == 0);
	io_sigv4_free(&out);

	/* the AWS dialect is untouched by the parameter */
	in.dialect = NULL;
	if (io_sigv4_sign(&in, &out, &err) == 0)
	{
		CHECK(strncmp(out.string_to_sign, "AWS4-HMAC-SHA256\n", 17) == 0 &&
			  strstr(out.string_to_sign, "/aws4_request\n") != NULL &&
			  strstr(out.canonical_request, "x-amz-date:") != NULL);
		io_sigv4_free(&out);
	}
}

static void
check_canonical(const char *in, const char *expect)
{
	char	   *c = NULL;
	TmsError	err;
	int			rc = io_location_canonical(in, NULL, &c, &err);

	if (expect == NULL)
		CHECK(rc != 0 && err.code == IO_ERR_INVALID_ARGUMENT, "%s should be refused", in);
	else
		CHECK(rc == 0 && strcmp(c, expect) == 0, "%s -> %s (%s)", in, c ? c : "error",
			  rc ? err.message : "");
	io_free(c);
}

static void
test_locations(void)
{
	IoParsedUri u;
	TmsError	err;

	check_canonical("gs://my-bucket/a/b.parquet", "gs://my-bucket/a/b.parquet");
	check_canonical("GS://my_bucket.example/k", "gs://my_bucket.example/k");
	check_canonical("gs://bucket", "gs://bucket");
	check_canonical("gs://My-Bucket/k", NULL);	/* uppercase */
	check_canonical("gs://ab/k", NULL); /* too short */
	check_canonical("gs:///k", NULL);
	check_canonical("gs://bucket/a/../b", NULL);
	check_canonical("gs://bucket/./b", NULL);
	check_canonical("gs://bu*cket/b", NULL);
	check_canonical("gcs://bucket/b", NULL);

	CHECK(io_uri_parse("gs://bkt/dir/file%2e.avro", &u, &err) == 0 &&
		  u.scheme == IO_URI_GCS && strcmp(u.bucket, "bkt") == 0 &&
		  strcmp(u.path, "dir/file%2e.avro") == 0);
	io_uri_free(&u);
	CHECK(io_uri_parse("gs://bkt", &u, &err) == 0 && u.scheme == IO_URI_GCS &&
		  strcmp(u.path, "") == 0);
	io_uri_free(&u);

	CHECK(io_location_under("gs://bkt/wh/t/data/f", "gs://bkt/wh/"));
	CHECK(io_location_under("gs://bkt/wh/t", "gs://bkt/wh"));
	CHECK(!io_location_under("gs://bkt/wh2/t", "gs://bkt/wh"));
	CHECK(!io_location_under("gs://bkt2/wh/t", "gs://bkt/wh"));
	CHECK(!io_location_under("s3://bkt/wh/t", "gs://bkt/wh"));
	CHECK(!io_location_under("gs://bkt/wh/t", "s3://bkt/wh"));
	CHECK(!io_location_under("gs://bkt/wh", "gs://bkt/wh"));
	CHECK(!io_location_under("gs://bkt/x", "gs:///"));
}

static void
test_batch_body(void)
{
	const char *keys[] = {"wh/t/data/a b.parquet", "wh/t/m/ü?#.avro"};
	IoStrBuf	b;
	TmsError	err;

	CHECK(io_gcs_batch_body("bkt", keys, 2, &b, &err) == 0);
	CHECK(strstr(b.data, "--" IO_GCS_BATCH_BOUNDARY "\r\nContent-Type: application/http\r\n"
				 "Content-Transfer-Encoding: binary\r\nContent-ID: <item-0>\r\n\r\n"
				 "DELETE /storage/v1/b/bkt/o/wh%2Ft%2Fdata%2Fa%20b.parquet HTTP/1.1\r\n\r\n") == b.data,
		  "%s", b.data);
	CHECK(strstr(b.data, "Content-ID: <item-1>\r\n\r\n"
				 "DELETE /storage/v1/b/bkt/o/wh%2Ft%2Fm%2F%C3%BC%3F%23.avro HTTP/1.1\r\n") != NULL,
		  "%s", b.data);
	CHECK(b.len > 28 && strcmp(b.data + b.len - strlen(IO_GCS_BATCH_BOUNDARY) - 6,
							   "--" IO_GCS_BATCH_BOUNDARY "--\r\n") == 0);
	io_sb_free(&b);
}

static void
test_batch_read(void)
{
	const char *ct = "multipart/mixed; boundary=batch_xyz";
	const char *body =
	"--batch_xyz\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: <response-item-2>\r\n"
	"\r\n"
	"HTTP/1.1 429 Too Many Requests\r\n"
	"Content-Type: application/json\r\n"
	"\r\n"
	"{\"error\": {\"code\": 429, \"message\": \"slow down\"}}\r\n"
	"--batch_xyz\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: <response-item-0>\r\n"
	"\r\n"
	"HTTP/1.1 204 No Content\r\n"
	"Content-Length: 0\r\n"
	"\r\n"
	"\r\n"
	"--batch_xyz\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: <response-item-1>\r\n"
	"\r\n"
	"HTTP/1.1 404 Not Found\r\n"
	"\r\n"
	"{\"error\": {\"code\": 404, \"message\": \"No such object\"}}\r\n"
	"--batch_xyz\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: <response-item-3>\r\n"
	"\r\n"
	"HTTP/1.1 403 Forbidden\r\n"
	"Content-Type: application/json; charset=UTF-8\r\n"
	"\r\n"
	"{\"error\": {\"code\": 403, \"message\": \"no delete for you\", \"errors\": "
	"[{\"reason\": \"forbidden\", \"message\": \"no\"}]}}\r\n"
	"--batch_xyz--\r\n";
	IoDeleteResult r[5];
	TmsError	err;

	memset(r, 0, sizeof(r));
	CHECK(io_gcs_batch_read(ct, body, strlen(body), 5, r, &err) == 0);
	CHECK(r[0].deleted && r[0].code[0] == '\0');
	CHECK(r[1].deleted, "a missing object is deleted");
	CHECK(!r[2].deleted && strcmp(r[2].code, "SlowDown") == 0 &&
		  io_delete_code_throttled(r[2].code));
	CHECK(!r[3].deleted && strcmp(r[3].code, "forbidden") == 0 &&
		  strstr(r[3].message, "403") != NULL && strstr(r[3].message, "no delete for you") != NULL,
		  "%s %s", r[3].code, r[3].message);
	CHECK(!r[4].deleted && strcmp(r[4].code, "NoResult") == 0);

	/* without Content-IDs, by position; the boundary quoted */
	{
		const char *b2 = "preamble\r\n--q\r\n\r\nHTTP/1.1 200 OK\r\n\r\n\r\n--q\r\n\r\nHTTP/1.1 503 Unavailable\r\n\r\n\r\n--q--";

		memset(r, 0, sizeof(r));
		CHECK(io_gcs_batch_read("multipart/mixed; boundary=\"q\"", b2, strlen(b2), 2, r, &err) == 0);
		CHECK(r[0].deleted && !r[1].deleted && strcmp(r[1].code, "SlowDown") == 0);
	}
	/* not a batch */
	CHECK(io_gcs_batch_read("application/json", "{}", 2, 1, r, &err) == -1 &&
		  err.code == IO_ERR_PROTOCOL);
	CHECK(io_gcs_batch_read(NULL, "", 0, 1, r, &err) == -1);

	/*
	 * every prefix of the answer is read without harm; what is cut is
	 * NoResult
	 */
	for (size_t n = 0; n <= strlen(body); n++)
	{
		char	   *cut = io_malloc(n + 1);

		memcpy(cut, body, n);
		cut[n] = 'X';			/* not NUL-terminated at n */
		memset(r, 0, sizeof(r));
		if (io_gcs_batch_read(ct, cut, n, 5, r, &err) != 0)
			FAIL("prefix %zu", n);
		io_free(cut);
	}
	/* an item number out of range is ignored */
	{
		const char *b3 = "--q\r\nContent-ID: <response-item-99>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\r\n--q--\r\n";

		memset(r, 0, sizeof(r));
		CHECK(io_gcs_batch_read("multipart/mixed; boundary=q", b3, strlen(b3), 1, r, &err) == 0 &&
			  !r[0].deleted && strcmp(r[0].code, "NoResult") == 0);
	}
}

static char *
sa_json(const char *email, const char *token_uri, const char *key)
{
	json_t	   *o = json_object();
	char	   *s,
			   *t;

	json_object_set_new(o, "type", json_string("service_account"));
	if (email)
		json_object_set_new(o, "client_email", json_string(email));
	if (token_uri)
		json_object_set_new(o, "token_uri", json_string(token_uri));
	if (key)
		json_object_set_new(o, "private_key", json_string(key));
	json_object_set_new(o, "private_key_id", json_string("kid-1"));
	t = json_dumps(o, JSON_COMPACT);
	s = io_strdup(t);
	io_json_free(t);
	json_decref(o);
	return s;
}

/* base64url decode (no padding) into a NUL-terminated malloc'd buffer. */
static unsigned char *
b64url_decode(const char *s, size_t n, size_t *outlen)
{
	char	   *t = io_malloc(n + 4);
	unsigned char *out = io_malloc(n + 4);
	size_t		m = n;
	int			len;

	for (size_t i = 0; i < n; i++)
		t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (m % 4)
		t[m++] = '=';
	len = EVP_DecodeBlock(out, (unsigned char *) t, (int) m);
	io_free(t);
	if (len < 0)
	{
		io_free(out);
		return NULL;
	}
	len -= (int) (m - n);		/* the padding decoded as zero bytes */
	out[len] = '\0';
	*outlen = (size_t) len;
	return out;
}

static void
test_jwt(void)
{
	char	   *text = sa_json("tms@p.iam.gserviceaccount.com", "http://127.0.0.1:1/token", dummy_key_pem);
	IoGcsServiceAccount *sa;
	TmsError	err;
	char	   *jwt = NULL;
	char	   *dot1,
			   *dot2;
	size_t		hl,
				cl,
				sl;
	unsigned char *hdr,
			   *claims,
			   *sig;

	sa = io_gcs_sa_parse(text, strlen(text), &err);
	CHECK(sa != NULL && strcmp(sa->client_email, "tms@p.iam.gserviceaccount.com") == 0);
	io_free(text);
	if (sa == NULL)
		return;
	CHECK(io_gcs_jwt(sa, IO_GCS_SCOPE, 1700000000, &jwt, &err) == 0);
	if (jwt == NULL)
	{
		io_gcs_sa_free(sa);
		return;
	}
	dot1 = strchr(jwt, '.');
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	CHECK(dot1 != NULL && dot2 != NULL && strchr(dot2 + 1, '.') == NULL &&
		  strpbrk(jwt, "+/=") == NULL, "%s", jwt);
	if (dot2 != NULL)
	{
		json_t	   *h,
				   *c;
		EVP_PKEY   *key;
		BIO		   *bio = BIO_new_mem_buf(dummy_key_pem, -1);
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();

		hdr = b64url_decode(jwt, (size_t) (dot1 - jwt), &hl);
		claims = b64url_decode(dot1 + 1, (size_t) (dot2 - dot1 - 1), &cl);
		sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &sl);
		h = json_loads((char *) hdr, 0, NULL);
		c = json_loads((char *) claims, 0, NULL);
		CHECK(h && strcmp(json_string_value(json_object_get(h, "alg")), "RS256") == 0 &&
			  strcmp(json_string_value(json_object_get(h, "typ")), "JWT") == 0 &&
			  strcmp(json_string_value(json_object_get(h, "kid")), "kid-1") == 0, "%s", hdr);
		CHECK(c && strcmp(json_string_value(json_object_get(c, "iss")), "tms@p.iam.gserviceaccount.com") == 0 &&
			  strcmp(json_string_value(json_object_get(c, "scope")), IO_GCS_SCOPE) == 0 &&
			  strcmp(json_string_value(json_object_get(c, "aud")), "http://127.0.0.1:1/token") == 0 &&
			  json_integer_value(json_object_get(c, "iat")) == 1700000000 &&
			  json_integer_value(json_object_get(c, "exp")) == 1700003600, "%s", claims);
		/* the signature verifies with the key's public half */
		key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
		CHECK(sl == 256 && key != NULL &&
			  EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
			  EVP_DigestVerify(ctx, sig, sl, (unsigned char *) jwt, (size_t) (dot2 - jwt)) == 1);
		EVP_MD_CTX_free(ctx);
		EVP_PKEY_free(key);
		BIO_free(bio);
		json_decref(h);
		json_decref(c);
		io_free(hdr);
		io_free(claims);
		io_free(sig);
	}
	io_free(jwt);
	io_gcs_sa_free(sa);

	/* bad keys: the field is named, the key never quoted */
	text = sa_json(NULL, "http://x/token", dummy_key_pem);
	CHECK(io_gcs_sa_parse(text, strlen(text), &err) == NULL &&
		  strstr(err.message, "client_email") != NULL && strstr(err.message, "MII") == NULL);
	io_free(text);
	text = sa_json("a@b", "file:///etc/passwd", dummy_key_pem);
	CHECK(io_gcs_sa_parse(text, strlen(text), &err) == NULL && strstr(err.message, "token_uri") != NULL);
	io_free(text);
	text = sa_json("a@b", "https://x/token", "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n");
	CHECK(io_gcs_key_check(text, &err) == -1 && strstr(err.message, "not an RSA private key") != NULL &&
		  strstr(err.message, "not a key") == NULL, "%s", err.message);
	io_free(text);
	CHECK(io_gcs_key_check("{\"type\": \"service_account\", \"private_key\": \"SECRETSTUFF\"", &err) == -1 &&
		  strstr(err.message, "SECRETSTUFF") == NULL, "%s", err.message);
	text = sa_json("a@b", "https://x/token", dummy_key_pem);
	CHECK(io_gcs_key_check(text, &err) == 0);
	io_free(text);
}

static void
test_base64url(void)
{
	char	   *s = io_base64url("\xfb\xff\xbf", 3);

	CHECK(s != NULL && strcmp(s, "-_-_") == 0, "%s", s);
	io_free(s);
	s = io_base64url("ab", 2);
	CHECK(s != NULL && strcmp(s, "YWI") == 0, "%s", s);
	io_free(s);
	s = io_base64url("", 0);
	CHECK(s != NULL && strcmp(s, "") == 0);
	io_free(s);
}

/* A vended token replaces every GCS credential of the mapping. */
static void
test_vended(void)
{
	IoKeyValue	kv[3] = {{"gcs.oauth2.token", "ya29.vended"},
	{"gcs.oauth2.token-expires-at", "1700000000000"},
	{"gcs.service.host", "http://evil.example"}};
	IoStorageConfig cfg;
	IoStorage  *st;
	TmsError	err;
	char		target[256];

	memset(&cfg, 0, sizeof(cfg));
	cfg.gcs_hmac_access_id = "MAPPINGID";
	cfg.gcs_hmac_secret = "mapping-secret";
	cfg.gcs_endpoint = "http://127.0.0.1:9/";
	io_storage_config_apply(&cfg, kv, 3, false);
	CHECK(cfg.gcs_credentials_vended && strcmp(cfg.gcs_oauth2_token, "ya29.vended") == 0 &&
		  cfg.gcs_hmac_access_id == NULL && cfg.gcs_hmac_secret == NULL &&
		  cfg.gcs_token_expire_ms == 1700000000000LL &&
		  strcmp(cfg.gcs_endpoint, "http://127.0.0.1:9/") == 0);
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL && io_storage_credentials_expire_ms(st) == 1700000000000LL);
	CHECK(st != NULL && io_storage_delete_max_keys(st, "gs://bkt/k") == IO_GCS_DELETE_MAX_KEYS &&
		  io_storage_delete_max_keys(st, "s3://bkt/k") == IO_S3_DELETE_MAX_KEYS &&
		  io_storage_delete_max_keys(st, "/tmp/k") == 0);
	CHECK(st != NULL && io_storage_target(st, "gs://bkt/a/b", target, sizeof(target)) == 0 &&
		  strcmp(target, "http://127.0.0.1:9/bkt") == 0, "%s", target);
	io_storage_free(st);
	/* the vended host only when allowed */
	io_storage_config_apply(&cfg, kv, 3, true);
	CHECK(strcmp(cfg.gcs_endpoint, "http://evil.example") == 0);

	/* HMAC keys: one object a delete request */
	memset(&cfg, 0, sizeof(cfg));
	cfg.gcs_hmac_access_id = "ID";
	cfg.gcs_hmac_secret = "S";
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL && io_storage_delete_max_keys(st, "gs://bkt/k") == 1);
	CHECK(st != NULL && io_storage_target(st, "gs://bkt/a", target, sizeof(target)) == 0 &&
		  strcmp(target, "https://storage.googleapis.com/bkt") == 0, "%s", target);
	io_storage_free(st);

	/* a bad endpoint, a bad key */
	memset(&cfg, 0, sizeof(cfg));
	cfg.gcs_endpoint = "ftp://x";
	CHECK(io_storage_create(&cfg, &err) == NULL && err.code == IO_ERR_INVALID_ARGUMENT);
	cfg.gcs_endpoint = "http://host/path";
	CHECK(io_storage_create(&cfg, &err) == NULL && err.code == IO_ERR_INVALID_ARGUMENT);
	cfg.gcs_endpoint = NULL;
	cfg.gcs_service_account_key = "{\"private_key\": \"TOPSECRET\"}";
	CHECK(io_storage_create(&cfg, &err) == NULL && strstr(err.message, "TOPSECRET") == NULL);
}

int
main(void)
{
	io_init();
	test_v4_conformance();
	test_v4_hmac_header();
	test_locations();
	test_batch_body();
	test_batch_read();
	test_jwt();
	test_base64url();
	test_vended();
	return unit_done();
}
